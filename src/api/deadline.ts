// The request timeout, made so that no timer throws away an answer that arrived (decision 14;
// docs/guarantees.md, "A frozen worker"). libuv runs due timers before it polls the sockets, so
// a woken process would abort calls whose answers are waiting. Here a due timer first lets a
// few loop turns read what arrived; a timer far past its due time measured a stall, and the
// call gets its timeout again, never past `hardMs` (its permit's in-flight bound). The timeout
// counts from the write (`sent()`).
import { LearnerTransferError, type ErrorCode } from '../core/errors.ts';

/** A timer later than this past its due time means the process was stalled, not busy. */
export const STALL_MS = 1_000;

/**
 * Loop turns in a row that read nothing before a due timeout aborts: the end of a cut answer
 * lands a turn or two later, and aborting before would report our timeout, not the cut.
 */
const QUIET_TURNS = 3;

/** The code of the error a call is aborted with when its timeout (or its hard bound) ran out. */
export const TIMEOUT_CODE: ErrorCode = 'ABORT_ERR';

export interface Deadline {
  signal: AbortSignal;
  /** The response moved forward: the pending decision waits one more turn. */
  progress(): void;
  /**
   * The request is being written: the answer gets the whole timeout from now, never past the
   * hard bound.
   */
  sent(): void;
  /** The call ended (answered, cut or failed): no decision is needed any more. */
  clear(): void;
  /** How long the process was stalled while this call waited (0 when it never was). */
  readonly stalledMs: number;
}

/**
 * Reports each stall once, however many timers see it: the first to fire after a wake sees the
 * longest part; later ones inside a reported stall say nothing.
 */
export class Stalls {
  #reportedUntil = -Infinity;
  readonly #onStall: ((stalledMs: number) => void) | undefined;

  constructor(onStall?: (stalledMs: number) => void) {
    this.#onStall = onStall;
  }

  /** A timer due at `due` fired at `now` (performance.now() ms): how late it was, if a stall. */
  note(due: number, now: number): number {
    const late = now - due;
    if (late < STALL_MS) return 0;
    if (due >= this.#reportedUntil) this.#onStall?.(Math.round(late));
    this.#reportedUntil = Math.max(this.#reportedUntil, now);
    return late;
  }
}

/**
 * The abort reason when a deadline runs out: Node's own timeout abort (classify.ts branches on
 * ABORT_ERR).
 */
class RequestTimeoutError extends LearnerTransferError {
  constructor(message: string) {
    super(TIMEOUT_CODE, message);
    this.name = 'TimeoutError';
  }
}

function timeoutError(ms: number, stalledMs: number): Error {
  const base = `The operation was aborted due to timeout (${ms} ms)`;
  return new RequestTimeoutError(
    stalledMs > 0
      ? `${base}: no answer had arrived after the process woke from a stall of ${(stalledMs / 1000).toFixed(1)} s`
      : base,
  );
}

/**
 * A deadline `ms` from now (never past `hardMs`). The caller passes `signal` to the request,
 * calls `progress()` as the answer arrives and `clear()` when it ends.
 */
export function startDeadline(ms: number, stalls: Stalls, hardMs = 2 * ms): Deadline {
  const controller = new AbortController();
  const start = performance.now();
  // The hard bound wins over the timeout: past it the limiter no longer counts the call in flight.
  const hardAt = start + Math.max(0, hardMs);
  let due = Math.min(start + ms, hardAt);
  let stalledMs = 0;
  let progressed = false;
  let timer: NodeJS.Timeout | undefined;
  let immediate: NodeJS.Immediate | undefined;
  let done = false;

  let quiet = 0;
  const decide = (): void => {
    immediate = undefined;
    if (done) return;
    // A turn that read some of the answer starts the count again.
    quiet = progressed ? 0 : quiet + 1;
    progressed = false;
    if (quiet < QUIET_TURNS) {
      immediate = setImmediate(decide);
      return;
    }
    done = true;
    controller.abort(timeoutError(ms, stalledMs));
  };

  const fire = (): void => {
    timer = undefined;
    if (done) return;
    const now = performance.now();
    const late = stalls.note(due, now);
    if (late > 0) {
      stalledMs += late;
      // The stalled time was not the service's: it gets its timeout again from the wake, within bounds.
      const next = Math.min(now + ms, hardAt);
      if (next > now) {
        due = next;
        timer = setTimeout(fire, next - now);
        return;
      }
    }
    // Whatever the socket holds is read in the poll phase before this immediate runs.
    progressed = false;
    quiet = 0;
    immediate = setImmediate(decide);
  };

  const stop = (): void => {
    if (timer) clearTimeout(timer);
    if (immediate) clearImmediate(immediate);
    timer = undefined;
    immediate = undefined;
  };

  timer = setTimeout(fire, due - start);
  return {
    signal: controller.signal,
    progress() {
      progressed = true;
    },
    sent() {
      if (done) return;
      // A decision already under way (the timer fired while the connection opened) starts again too.
      stop();
      const now = performance.now();
      due = Math.min(now + ms, hardAt);
      timer = setTimeout(fire, Math.max(0, due - now));
    },
    clear() {
      done = true;
      stop();
    },
    get stalledMs() {
      return Math.round(stalledMs);
    },
  };
}
