// Retry-After is either delta-seconds or an HTTP-date (RFC 9110 §10.2.3).

/**
 * The longest wait any delay from outside may set: one day, so nothing sleeps for weeks or
 * overflows Node's timers (past 2^31-1 ms a timer fires at once).
 */
export const MAX_RETRY_AFTER_MS = 86_400_000;

/** A delay from outside, made safe for a timer: finite ms from 0 to MAX_RETRY_AFTER_MS. */
export function capDelayMs(ms: number): number {
  if (Number.isNaN(ms)) return 0;
  return Math.min(MAX_RETRY_AFTER_MS, Math.max(0, ms));
}

/**
 * Milliseconds to wait from `now` (at most MAX_RETRY_AFTER_MS), or undefined when absent or
 * unreadable.
 */
export function parseRetryAfter(value: string | string[] | undefined, now = Date.now()): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (text === undefined) return undefined;
  const trimmed = text.trim();
  if (/^\d+$/.test(trimmed)) return capDelayMs(Number(trimmed) * 1000);
  if (/^\d+\.\d+$/.test(trimmed)) return capDelayMs(Math.ceil(Number(trimmed) * 1000));
  const date = Date.parse(trimmed);
  if (Number.isNaN(date) || !/[a-z]/i.test(trimmed)) return undefined;
  return capDelayMs(date - now);
}
