// Progress for long commands: a live line on a terminal (rate and ETA), plain periodic lines
// otherwise. Written to stderr so stdout stays for results.
import type { Output } from './io.ts';

export interface ProgressOptions {
  label: string;
  /** Total units when known (bytes of a file, pages of a crawl), for ETA. */
  total?: number | undefined;
  unit?: string;
  /** The command's stderr. */
  stream: Output;
  /** Interval between plain lines when not a terminal. */
  plainEveryMs?: number;
  enabled?: boolean;
}

export class Progress {
  readonly #opts: Required<Omit<ProgressOptions, 'total'>> & { total: number | undefined };
  readonly #started = Date.now();
  readonly #tty: boolean;
  #last = 0;
  #done = 0;
  #extra = '';
  #ended = false;

  constructor(options: ProgressOptions) {
    this.#opts = {
      unit: 'rows',
      plainEveryMs: 5000,
      enabled: true,
      ...options,
      total: options.total,
    };
    this.#tty = Boolean(this.#opts.stream.isTTY);
  }

  /** `done` in the same unit as total; `extra` is free text (counts). */
  update(done: number, extra = ''): void {
    this.#done = done;
    this.#extra = extra;
    const now = Date.now();
    const every = this.#tty ? 200 : this.#opts.plainEveryMs;
    if (now - this.#last >= every) {
      this.#last = now;
      this.#draw(false);
    }
  }

  end(extra?: string): void {
    if (this.#ended) return;
    this.#ended = true;
    if (extra !== undefined) this.#extra = extra;
    this.#draw(true);
  }

  #draw(final: boolean): void {
    if (!this.#opts.enabled) return;
    const elapsed = (Date.now() - this.#started) / 1000;
    const rate = elapsed > 0 ? this.#done / elapsed : 0;
    const total = this.#opts.total;
    let pct = '';
    let eta = '';
    if (total && total > 0) {
      const share = Math.min(1, this.#done / total);
      pct = ` ${(share * 100).toFixed(1)}%`;
      if (!final && rate > 0 && share < 1) eta = ` ETA ${Math.ceil((total - this.#done) / rate)}s`;
    }
    const bar =
      total && this.#tty
        ? ` [${'#'.repeat(Math.round(Math.min(1, this.#done / total) * 20)).padEnd(20, '.')}]`
        : '';
    const text = `${this.#opts.label}${bar}${pct} ${this.#extra}${eta}${final ? ` in ${elapsed.toFixed(1)}s` : ''}`;
    if (this.#tty) this.#opts.stream.write(`\r\x1b[2K${text}${final ? '\n' : ''}`);
    else this.#opts.stream.write(`${text}\n`);
  }
}
