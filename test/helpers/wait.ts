// The one way a test waits for something. A wait that runs out fails the test, naming what it waited
// for and what it last saw: a wait that gives up in silence lets the test go on with nothing at stake
// (a fault injected into an idle system proves nothing), and passes.
import { setTimeout as sleep } from 'node:timers/promises';

export interface WaitOptions {
  /** How long to wait in all (ms). Generous: a busy two-core machine is slow, and a pass costs no more. */
  timeoutMs?: number;
  /** Pause between checks (ms). */
  everyMs?: number;
}

/**
 * Checks `probe` until `done(value)` holds and returns that value; throws after `timeoutMs` with
 * `what`, the last value seen (through `show`, JSON by default) and how long it waited.
 */
export async function waitFor<T>(
  what: string,
  probe: () => T | Promise<T>,
  done: (value: T) => boolean,
  {
    timeoutMs = 30_000,
    everyMs = 20,
    show = (v: T) => JSON.stringify(v),
  }: WaitOptions & { show?: (v: T) => string } = {},
): Promise<T> {
  const start = Date.now();
  for (;;) {
    const value = await probe();
    if (done(value)) return value;
    if (Date.now() - start >= timeoutMs) {
      throw new Error(`waited ${Date.now() - start} ms for ${what}; last saw ${clip(show(value))}`);
    }
    await sleep(everyMs);
  }
}

/** Waits until a count reaches at least `n`; throws naming the count it last saw. */
export function waitForCount(
  what: string,
  count: () => number | Promise<number>,
  n: number,
  options?: WaitOptions,
) {
  return waitFor(`${what} to reach ${n}`, count, (v) => v >= n, options);
}

/** Waits until `check` is true; throws naming `what`. */
export async function waitUntil(
  what: string,
  check: () => boolean | Promise<boolean>,
  options?: WaitOptions,
) {
  await waitFor(what, check, (v) => v, options);
}

function clip(text: string | undefined): string {
  const t = text ?? 'undefined';
  return t.length > 400 ? `${t.slice(0, 400)}... (${t.length} chars)` : t;
}
