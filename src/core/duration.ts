// Limits are written N/DURATION ("100/1h", "100/4s"), so tests and the demo can compress time.

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

export interface Rate {
  /** Most requests allowed in any window of `windowMs`. */
  max: number;
  windowMs: number;
}

const DURATION_RE = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/;

/** Parses "1h", "250ms", "1.5s" into milliseconds; undefined when the text is not a duration. */
export function parseDuration(text: string): number | undefined {
  const m = DURATION_RE.exec(text.trim());
  if (!m || m[1] === undefined || m[2] === undefined) return undefined;
  // Rounded first: '0.4ms' is 0 ms, not a duration (a timer of 0 fires at once).
  const ms = Math.round(Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS]);
  return Number.isFinite(ms) && ms > 0 ? ms : undefined;
}

/**
 * The bounds of a limit, checked where it is written and where it is read (limiter/policy.ts,
 * and limiter/includes/policy.lua, which repeats the two numbers): a window of whole ms up to a
 * year, at most a million permits per window (docs/limits.md).
 */
export const RATE_MAX_COUNT = 1_000_000;
export const RATE_MAX_WINDOW_MS = 365 * UNIT_MS.d;

/** The bounds above, for a rate already in numbers (a stored one, or one built in code). */
export function rateInBounds(rate: Rate): boolean {
  return (
    Number.isSafeInteger(rate.max) &&
    rate.max >= 1 &&
    rate.max <= RATE_MAX_COUNT &&
    Number.isSafeInteger(rate.windowMs) &&
    rate.windowMs >= 1 &&
    rate.windowMs <= RATE_MAX_WINDOW_MS
  );
}

/** A limit read from text: the rate, or why it is refused (undefined: not N/DURATION at all). */
export type RateReading = { ok: true; rate: Rate } | { ok: false; why: string | undefined };

/**
 * THE parser of a limit, wherever a person writes one: "100/1h", "20/250ms", "5/1.5s", "100/h".
 * Decimal arithmetic is exact (BigInt): "5/0.0005s" is refused, not rounded.
 */
export function readRate(text: string): RateReading {
  const m = /^\s*(\d+)\s*\/\s*(?:(\d+)(?:\.(\d+))?)?(ms|s|m|h|d)\s*$/.exec(text);
  if (!m || m[1] === undefined || m[4] === undefined) return { ok: false, why: undefined };
  const count = BigInt(m[1]);
  if (count < 1n) return { ok: false, why: 'N must be at least 1 (to send nothing, pause instead)' };
  if (count > BigInt(RATE_MAX_COUNT)) return { ok: false, why: `N is more than ${RATE_MAX_COUNT}` };
  const digits = m[2] === undefined ? '1' : `${m[2]}${m[3] ?? ''}`;
  const scale = 10n ** BigInt(m[3]?.length ?? 0);
  const scaled = BigInt(digits) * BigInt(UNIT_MS[m[4] as keyof typeof UNIT_MS]);
  const window = `${m[2] ?? ''}${m[3] === undefined ? '' : `.${m[3]}`}${m[4]}`;
  if (scaled % scale !== 0n) return { ok: false, why: `${window} is not a whole number of milliseconds` };
  const windowMs = scaled / scale;
  if (windowMs < 1n) return { ok: false, why: `the window ${window} is shorter than 1ms` };
  if (windowMs > BigInt(RATE_MAX_WINDOW_MS)) {
    return { ok: false, why: `the window ${window} is longer than ${formatDuration(RATE_MAX_WINDOW_MS)}` };
  }
  return { ok: true, rate: { max: Number(count), windowMs: Number(windowMs) } };
}

/** readRate's rate, or undefined when it refuses the text. */
export function parseRate(text: string): Rate | undefined {
  const r = readRate(text);
  return r.ok ? r.rate : undefined;
}

/** The one message for a refused limit, naming the field and the value, then why. */
export function rateMessage(field: string, text: string, why: string | undefined): string {
  const shown = text.length > 60 ? `${text.slice(0, 57)}...` : text;
  return (
    `${field}: expected N/DURATION like 100/1h (units ms, s, m, h, d), got '${shown}'` +
    (why ? `: ${why} (N from 1 to ${RATE_MAX_COUNT}, a window of whole milliseconds from 1ms to 365d)` : '')
  );
}

/** "1000/1d" style, for messages. */
export function formatRate(rate: Rate): string {
  return `${rate.max}/${formatDuration(rate.windowMs)}`;
}

export function formatDuration(ms: number): string {
  for (const [unit, size] of [
    ['d', UNIT_MS.d],
    ['h', UNIT_MS.h],
    ['m', UNIT_MS.m],
    ['s', UNIT_MS.s],
  ] as const) {
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}

/** Human wording for an ETA: "3 days 4 h", "12 min", "40 s". */
export function humanizeMs(ms: number): string {
  if (!Number.isFinite(ms) || ms <= 0) return 'now';
  const d = Math.floor(ms / UNIT_MS.d);
  const h = Math.floor((ms % UNIT_MS.d) / UNIT_MS.h);
  const m = Math.floor((ms % UNIT_MS.h) / UNIT_MS.m);
  const s = Math.ceil((ms % UNIT_MS.m) / UNIT_MS.s);
  if (d > 0) return h > 0 ? `${d} day${d > 1 ? 's' : ''} ${h} h` : `${d} day${d > 1 ? 's' : ''}`;
  if (h > 0) return m > 0 ? `${h} h ${m} min` : `${h} h`;
  if (m > 0) return `${m} min`;
  return `${s} s`;
}
