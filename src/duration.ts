// Limits are written N/DURATION ("100/1h", "1000/1d", "100/4s") so tests and the demo can compress time.

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

export interface Rate {
  /** Most requests allowed in any window of `windowMs`. */
  max: number;
  windowMs: number;
}

const DURATION_RE = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/;

/** Parses "1h", "250ms", "1.5s" into milliseconds; returns undefined when the text is not a duration. */
export function parseDuration(text: string): number | undefined {
  const m = DURATION_RE.exec(text.trim());
  if (!m || m[1] === undefined || m[2] === undefined) return undefined;
  // Rounded first: '0.4ms' is 0 ms, not a duration (a timer of 0 fires at once).
  const ms = Math.round(Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS]);
  return Number.isFinite(ms) && ms > 0 ? ms : undefined;
}

/** Parses "100/1h" (a bare unit means one of it: "100/h"). Returns undefined when malformed. */
export function parseRate(text: string): Rate | undefined {
  const m = /^\s*(\d+)\s*\/\s*(\d*(?:\.\d+)?)(ms|s|m|h|d)\s*$/.exec(text);
  if (!m || m[1] === undefined || m[3] === undefined) return undefined;
  const max = Number(m[1]);
  const windowMs = parseDuration(`${m[2] || '1'}${m[3]}`);
  if (!Number.isSafeInteger(max) || max < 1 || windowMs === undefined) return undefined;
  return { max, windowMs };
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
