// Small calendar helpers of the run windows: day numbers, weekdays, clock text, and the usage
// error a person's bad text gets.
import { LearnerTransferError } from '../core/errors.ts';
import { jsonForTerminal } from '../core/terminal-safe.ts';

export const MINUTE = 60_000;
export const DAY = 86_400_000;
export const DAY_NAMES = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'] as const;

export function usage(message: string): never {
  throw new LearnerTransferError('LT_USAGE', message);
}

/**
 * A person's text inside a message, control characters written as escapes (\u001b): visible,
 * never run.
 */
export const shown = (text: string): string => jsonForTerminal(JSON.stringify(text).slice(1, -1));

/** The day number (days since 1970-01-01) of a real calendar date, or undefined. */
export function dayNumber(ymd: string): number | undefined {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(ymd);
  if (!m) return undefined;
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const date = new Date(Date.UTC(y, mo - 1, d));
  // Date.UTC rolls 02-30 into March (and years below 100 into the 1900s): a real date reads
  // back.
  if (date.getUTCFullYear() !== y || date.getUTCMonth() !== mo - 1 || date.getUTCDate() !== d)
    return undefined;
  return date.getTime() / DAY;
}

export function ymdOf(day: number): string {
  return new Date(day * DAY).toISOString().slice(0, 10);
}

/** 0=Sun..6=Sat of a day number (1970-01-01 was a Thursday). */
export const weekday = (day: number): number => (((day + 4) % 7) + 7) % 7;

export function hhmm(minutes: number): string {
  return `${String(Math.floor(minutes / 60)).padStart(2, '0')}:${String(minutes % 60).padStart(2, '0')}`;
}
