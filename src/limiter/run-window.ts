// The run-window calendar: when, in an organization's time zone, transfers may run
// (docs/run-windows.md); this file turns a schedule into open UTC intervals. Pure: every
// instant is a parameter. The text is run-window-text.ts, the time-zone engine time-zone.ts,
// the helpers calendar.ts.
import { DAY, DAY_NAMES, MINUTE, dayNumber, hhmm, shown, usage, weekday, ymdOf } from './calendar.ts';
import {
  formatBlackouts,
  parseBlackouts,
  parseRunWindow,
  type DateRange,
  type RunSchedule,
  type RunWindowRule,
} from './run-window-text.ts';
import { checkTimeZone, localOf, timeline, wallToUtc, zoneOf, type Timeline } from './time-zone.ts';

export {
  formatBlackouts,
  formatRunWindow,
  parseBlackouts,
  parseRunWindow,
  type DateRange,
  type RunSchedule,
  type RunWindowRule,
} from './run-window-text.ts';
export { checkTimeZone, localToUtc } from './time-zone.ts';

const HORIZON_DAYS = 400;
const HORIZON_MS = HORIZON_DAYS * DAY;

type Interval = [number, number];
/** First and last local day numbers whose windows can reach the span asked about. */
type DaySpan = [first: number, last: number];

/**
 * Open intervals [startMs, endMs) in UTC epoch ms that intersect [fromMs, untilMs), merged
 * (adjacent/overlapping joined), sorted, clipped to [fromMs, untilMs).
 */
export function openIntervals(s: RunSchedule, fromMs: number, untilMs: number): Array<[number, number]> {
  if (!Number.isFinite(fromMs) || !Number.isFinite(untilMs)) {
    throw new RangeError(`openIntervals needs finite instants, got ${fromMs}..${untilMs}`);
  }
  if (untilMs <= fromMs) return [];
  const tl = timeline(zoneOf(s.tz), fromMs, untilMs);
  // A window belongs to the day it starts on and ends by the next midnight: the day before
  // counts.
  const days: DaySpan = [localOf(tl, fromMs).day - 1, localOf(tl, untilMs).day];
  const open = s.windows.length === 0 ? [[fromMs, untilMs] as Interval] : windowTimes(tl, s.windows, days);
  const closed = blackoutTimes(tl, s.blackouts, days);
  const out: Interval[] = [];
  for (const [a, b] of subtract(merge(open), merge(closed))) {
    const start = Math.max(a, fromMs);
    const end = Math.min(b, untilMs);
    if (end > start) out.push([start, end]);
  }
  return out;
}

/** Each rule's window on each local day of `days`. */
function windowTimes(tl: Timeline, rules: RunWindowRule[], [firstDay, lastDay]: DaySpan): Interval[] {
  const spans = rules.map((rule) => ({
    mask: rule.days.reduce((mask, d) => mask | (1 << d), 0),
    start: (rule.all ? 0 : rule.start) * MINUTE,
    end: (rule.all ? 1440 : rule.end <= rule.start ? rule.end + 1440 : rule.end) * MINUTE,
  }));
  const out: Interval[] = [];
  for (let day = firstDay; day <= lastDay; day++) {
    const bit = 1 << weekday(day);
    for (const { mask, start, end } of spans) {
      if ((mask & bit) === 0) continue;
      const a = wallToUtc(tl, day * DAY + start);
      const b = wallToUtc(tl, day * DAY + end);
      if (b > a) out.push([a, b]); // a window wholly in a spring gap is empty
    }
  }
  return out;
}

/** Blackout days as UTC intervals, local midnight to midnight, cut to `days` widened by one. */
function blackoutTimes(tl: Timeline, ranges: DateRange[], [firstDay, lastDay]: DaySpan): Interval[] {
  const out: Interval[] = [];
  for (const range of ranges) {
    const from = dayNumber(range.from);
    const to = dayNumber(range.to);
    // A stored blackout nobody can read must not quietly open its days.
    if (from === undefined || to === undefined)
      usage(`blackout "${shown(formatBlackouts([range]))}" is not a date range`);
    const a = Math.max(from, firstDay - 1);
    const b = Math.min(to + 1, lastDay + 2);
    if (b > a) out.push([wallToUtc(tl, a * DAY), wallToUtc(tl, b * DAY)]);
  }
  return out;
}

/** Sorted, with overlapping and touching intervals joined. */
function merge(intervals: Interval[]): Interval[] {
  const sorted = [...intervals].sort((x, y) => x[0] - y[0]);
  const out: Interval[] = [];
  for (const [a, b] of sorted) {
    const prev = out[out.length - 1];
    if (prev && a <= prev[1]) prev[1] = Math.max(prev[1], b);
    else out.push([a, b]);
  }
  return out;
}

/** `open` minus `closed`, both merged. */
function subtract(open: Interval[], closed: Interval[]): Interval[] {
  const out: Interval[] = [];
  let j = 0;
  for (const [start, end] of open) {
    while (j < closed.length && closed[j]![1] <= start) j++;
    let a = start;
    for (let k = j; a < end; k++) {
      const cut = closed[k];
      if (!cut || cut[0] >= end) {
        out.push([a, end]);
        break;
      }
      if (cut[0] > a) out.push([a, cut[0]]);
      a = Math.max(a, cut[1]);
    }
  }
  return out;
}

/**
 * The open interval containing t (its start may be < t), or else the next, within `horizonMs`
 * (400 days) either way; null if none.
 */
export function openAt(s: RunSchedule, t: number, horizonMs: number = HORIZON_MS): [number, number] | null {
  if (!(horizonMs > 0) || !Number.isFinite(horizonMs))
    throw new RangeError(`openAt needs a horizon > 0, got ${horizonMs}`);
  // Most answers lie within days: look 8 days each way, widening only while the answer is at an
  // edge.
  let back = Math.min(8 * DAY, horizonMs);
  let ahead = back;
  for (;;) {
    const found = openIntervals(s, t - back, t + ahead).find(([, end]) => end > t);
    const widenBack = found !== undefined && found[0] === t - back && back < horizonMs;
    const widenAhead = (found === undefined || found[1] === t + ahead) && ahead < horizonMs;
    if (!widenBack && !widenAhead) return found ?? null;
    if (widenBack) back = Math.min(back * 8, horizonMs);
    if (widenAhead) ahead = Math.min(ahead * 8, horizonMs);
  }
}

/**
 * Human text at `nowMs`: "open until Tue 07:00 Europe/Berlin", "opens Mon 18:00 ..." (with the
 * date past 6 days), or "never opens (no open time in the next 400 days)".
 */
export function describeRunWindow(s: RunSchedule, nowMs: number): string {
  if (s.windows.length === 0 && s.blackouts.length === 0) return 'always open (no run window set)';
  const found = openAt(s, nowMs, HORIZON_MS);
  if (!found) return `never opens (no open time in the next ${HORIZON_DAYS} days)`;
  const zone = zoneOf(s.tz);
  const when = (t: number): string => {
    const { day, minutes } = localOf(timeline(zone, t, t), t);
    const date = t - nowMs > 6 * DAY ? ` ${ymdOf(day)}` : '';
    return `${DAY_NAMES[weekday(day)]}${date} ${hhmm(minutes)} ${s.tz}`;
  };
  if (found[0] > nowMs) return `opens ${when(found[0])}`;
  if (found[1] >= nowMs + HORIZON_MS) return `open (no closing time in the next ${HORIZON_DAYS} days)`;
  return `open until ${when(found[1])}`;
}

/** The calendar texts of a policy ('' when absent), as stored. */
export interface RunWindowTexts {
  windows: string;
  tz: string;
  blackout: string;
}

/** The schedule of stored texts, or null when none is set. A blackout alone means every day else is open. */
export function scheduleOf(texts: RunWindowTexts): RunSchedule | null {
  if (texts.windows === '' && texts.blackout === '') return null;
  return {
    windows: parseRunWindow(texts.windows === '' ? 'all all' : texts.windows),
    tz: checkTimeZone(texts.tz === '' ? 'UTC' : texts.tz),
    blackouts: texts.blackout === '' ? [] : parseBlackouts(texts.blackout),
  };
}

/** A run window as shown: its calendar, whether it is open now, and "open until ..." / "opens ...". */
export interface RunWindowState {
  windows: string;
  tz: string;
  blackout: string;
  open: boolean;
  now: string;
}

/** The run window of a peek at `nowMs`: its texts and "open until ..." / "opens ..."; null when none. */
export function runWindowOf(view: { runWindow?: RunWindowTexts }, nowMs: number): RunWindowState | null {
  if (!view.runWindow) return null;
  let schedule;
  try {
    schedule = scheduleOf(view.runWindow);
  } catch (err) {
    // Stored by hand, or a time zone this host does not know: said, never a failed status.
    return {
      windows: view.runWindow.windows,
      tz: view.runWindow.tz,
      blackout: view.runWindow.blackout,
      open: false,
      now: `unreadable here (${(err as Error).message}): closed until it is set again`,
    };
  }
  if (!schedule) return null;
  const open = openAt(schedule, nowMs);
  return {
    windows: view.runWindow.windows || 'all all',
    tz: schedule.tz,
    blackout: view.runWindow.blackout,
    open: open !== null && open[0] <= nowMs,
    now: describeRunWindow(schedule, nowMs),
  };
}
