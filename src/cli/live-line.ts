// The one live line of a run at a terminal, drawn over itself. Any other line written meanwhile
// first clears it and has it drawn again below, so the two never mix on one line.

/** A stream the line is drawn on (a terminal's). */
type Output = { write(text: string): unknown };

const CLEAR = '\r\x1b[2K';

export class LiveLine {
  #stream: Output | undefined;
  #text = '';
  #shown = false;

  /** Where the line is drawn from now on: a terminal's stream. */
  attach(stream: Output): void {
    this.#stream = stream;
  }

  /** Draws `text` in place of the line shown. */
  show(text: string): void {
    const stream = this.#stream;
    if (!stream) return;
    this.#text = text;
    stream.write(`${CLEAR}${text}`);
    this.#shown = true;
  }

  /** Runs `write` (a line on the terminal) with the live line cleared before, drawn again after. */
  around(write: () => void): void {
    const stream = this.#stream;
    if (!this.#shown || !stream) {
      write();
      return;
    }
    stream.write(CLEAR);
    write();
    stream.write(this.#text);
  }

  /** Leaves the last line shown on its own line (or clears it, `keep` false), and stops drawing. */
  end(keep = true): void {
    const stream = this.#stream;
    if (stream && this.#shown) stream.write(keep ? '\n' : CLEAR);
    this.#shown = false;
    this.#stream = undefined;
  }
}
