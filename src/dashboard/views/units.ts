// Numbers and limits as a person reads them: `20,000`, `per 4 s`, `100 per hour`, whatever N/DURATION a
// limit was written with (LIMIT_*, `limits set`), instead of `100/3600000ms`.
import { parseRate, type Rate } from '../../core/duration.ts';

const numberFormat = new Intl.NumberFormat('en-US');

/** 20000 -> "20,000". */
export const num = (n: number): string => numberFormat.format(n);

const NAMED: [number, string][] = [
  [1000, 'second'],
  [60_000, 'minute'],
  [3_600_000, 'hour'],
  [86_400_000, 'day'],
  [7 * 86_400_000, 'week'],
];

/** "per hour", "per day", "per 4 s", "per 30 min", "per 2 h", "per 1,500 ms". */
export function perWindow(ms: number): string {
  const named = NAMED.find(([size]) => size === ms);
  if (named) return `per ${named[1]}`;
  for (const [size, unit] of [
    [86_400_000, 'd'],
    [3_600_000, 'h'],
    [60_000, 'min'],
    [1000, 's'],
  ] as const) {
    if (ms >= size && ms % size === 0) return `per ${num(ms / size)} ${unit}`;
  }
  return `per ${num(ms)} ms`;
}

/** "1,000 per day". */
export function humanRate(rate: Rate): string {
  return `${num(rate.max)} ${perWindow(rate.windowMs)}`;
}

/** A stored "N/DURATION" text ("100/3600000ms") as humanRate says it; the text itself when unreadable. */
export function humanRateText(text: string): string {
  const rate = parseRate(text);
  return rate ? humanRate(rate) : text;
}
