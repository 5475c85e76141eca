// The run-window calendar: when, in an organization's own time zone, transfers may run. Operators keep
// transfers out of the school day (`limits set --run-window "Mon-Fri 18:00-07:00, Sat-Sun all"
// --tz Europe/Berlin --blackout 2026-12-21..2027-01-06`); this module reads and writes that text and turns
// it into open intervals of UTC time. Pure: every instant comes in as a parameter. Its only state is a
// cache of each zone's UTC offsets, a fact of the zone's rules and not of the clock.
//
// Local wall time to UTC across a DST change (localToUtc): a wall time that does not exist (the spring
// gap, 02:30 on 2026-03-29 in Europe/Berlin) is the first instant after the gap (03:00 local); one that
// happens twice (the autumn repeat) is its EARLIER instant, for a window's start and its end alike. So a
// window's end and the next window's start at the same wall time are the same instant (nothing lost or
// doubled), an 18:00-07:00 window across the change lasts its real 12 or 14 hours, a window wholly in
// the gap is empty (and dropped), and Berlin's 02:00-03:00 on the autumn day lasts 2 hours.
import { LearnerTransferError } from '../core/errors.ts';
import { jsonForTerminal } from '../core/terminal-safe.ts';

export interface RunSchedule {
  /** No rule at all means no run window is set: always open (but blackouts still close). */
  windows: RunWindowRule[];
  /** A canonical IANA name (checkTimeZone). */
  tz: string;
  blackouts: DateRange[];
}

export interface RunWindowRule {
  /** The days a window starts on: 0=Sun..6=Sat, sorted unique. */
  days: number[];
  /** Minutes after local midnight, 0..1439. */
  start: number;
  /** Minutes after local midnight, 1..1440; end <= start means on the next day (the window is its start day's). */
  end: number;
  /** Written `all`: the whole local day (start 0, end 1440). */
  all: boolean;
}

/** Local dates in the schedule's zone, both included. */
export interface DateRange {
  /** YYYY-MM-DD */
  from: string;
  /** YYYY-MM-DD, not before `from`. */
  to: string;
}

const MINUTE = 60_000;
const DAY = 86_400_000;
const HORIZON_DAYS = 400;
const HORIZON_MS = HORIZON_DAYS * DAY;
const DAY_NAMES = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'] as const;
const DAY_INDEX = new Map(DAY_NAMES.map((name, i) => [name.toLowerCase(), i]));
const ALL_DAYS = [0, 1, 2, 3, 4, 5, 6];
const WINDOW_EXAMPLE = '"Mon-Fri 18:00-07:00, Sat-Sun all"';
const DAYS_EXPECTED = 'expected Mon..Sun, a range like Mon-Fri, or all';
const BLACKOUT_EXPECTED = 'expected YYYY-MM-DD or YYYY-MM-DD..YYYY-MM-DD, like 2026-12-21..2027-01-06';

function usage(message: string): never {
  throw new LearnerTransferError('LT_USAGE', message);
}

/**
 * A person's text inside a message, with every control character written as an escape (\u001b): it
 * sends the terminal nothing to run, and the bad piece stays visible (removed, "M<ESC>on" would read "Mon").
 */
const shown = (text: string): string => jsonForTerminal(JSON.stringify(text).slice(1, -1));

// ---- run windows: text <-> rules ----

/** `Mon-Fri 18:00-07:00, Sat-Sun all`: one rule per comma-separated entry, in the order written. */
export function parseRunWindow(text: string): RunWindowRule[] {
  if (text.trim() === '') usage(`run window is empty (expected entries like ${WINDOW_EXAMPLE})`);
  return text.split(',').map((entry) => parseWindowEntry(entry.trim()));
}

function parseWindowEntry(entry: string): RunWindowRule {
  if (entry === '')
    usage(`run window: an empty entry between commas (expected entries like ${WINDOW_EXAMPLE})`);
  const where = `run window "${shown(entry)}"`;
  // "Mon - Fri 18:00 - 07:00" is the same entry: only the space between days and hours separates.
  const tokens = entry.replace(/\s*-\s*/g, '-').split(/\s+/);
  if (tokens.length !== 2) {
    usage(`${where}: expected DAYS HOURS, like "Mon-Fri 18:00-07:00", "Sat-Sun all" or "all 20:00-06:00"`);
  }
  const [dayText, hourText] = tokens as [string, string];
  const days = parseDays(dayText, where);
  if (hourText.toLowerCase() === 'all') return { days, start: 0, end: 1440, all: true };
  const m = /^(\d{1,2}:\d{2})-(\d{1,2}:\d{2})$/.exec(hourText);
  if (!m) {
    usage(`${where}: hours '${shown(hourText)}' are not HH:MM-HH:MM (expected like 18:00-07:00, or all)`);
  }
  const start = clockMinutes(m[1]!, where);
  const end = clockMinutes(m[2]!, where);
  if (start === 1440) usage(`${where}: 24:00 can only end a window (a window from midnight starts at 00:00)`);
  if (start === end % 1440) usage(`${where}: starts and ends at ${m[1]} (use all for a whole day)`);
  // An end at 00:00 is the next midnight, which the rules write as 1440.
  return { days, start, end: end === 0 ? 1440 : end, all: false };
}

function parseDays(text: string, where: string): number[] {
  if (text.toLowerCase() === 'all') return [...ALL_DAYS];
  const parts = text.split('-');
  if (parts.length > 2) usage(`${where}: '${shown(text)}' is not a day, a range or all (${DAYS_EXPECTED})`);
  const [from, to = from] = parts.map((part) => {
    const day = DAY_INDEX.get(part.toLowerCase());
    if (day === undefined) usage(`${where}: unknown day '${shown(part)}' (${DAYS_EXPECTED})`);
    return day;
  }) as [number, number?];
  // A range may wrap the week: Fri-Mon is Fri, Sat, Sun, Mon.
  const days: number[] = [];
  for (let d = from; ; d = (d + 1) % 7) {
    days.push(d);
    if (d === to) break;
  }
  return days.sort((a, b) => a - b);
}

function clockMinutes(text: string, where: string): number {
  const [h, m] = text.split(':').map(Number) as [number, number];
  if (h === 24 && m === 0) return 1440;
  if (h > 23 || m > 59) {
    usage(`${where}: '${shown(text)}' is not a time of day (expected 00:00 to 23:59, or 24:00 as an end)`);
  }
  return h * 60 + m;
}

/**
 * The canonical text of rules: parseRunWindow reads it back to equal rules. A rule built in code whose
 * days are not one run of the week (Mon and Wed) has no one-entry text: it is written as one entry per
 * run, the same schedule in more rules.
 */
export function formatRunWindow(rules: RunWindowRule[]): string {
  return rules.flatMap((rule) => dayRuns(rule.days).map((days) => `${days} ${hoursText(rule)}`)).join(', ');
}

function dayRuns(days: number[]): string[] {
  const set = new Set(days);
  if (ALL_DAYS.every((d) => set.has(d))) return ['all'];
  const runs: string[] = [];
  // Monday first, as people read a week; a run starts where the day before is not in the set.
  for (const first of [1, 2, 3, 4, 5, 6, 0]) {
    if (!set.has(first) || set.has((first + 6) % 7)) continue;
    let last = first;
    while (set.has((last + 1) % 7)) last = (last + 1) % 7;
    runs.push(last === first ? DAY_NAMES[first]! : `${DAY_NAMES[first]}-${DAY_NAMES[last]}`);
  }
  return runs;
}

function hoursText(rule: RunWindowRule): string {
  // 00:00-24:00 is refused as text (a window must not start where it ends): its text is all.
  const whole = rule.all || (rule.start === 0 && rule.end === 1440);
  return whole ? 'all' : `${hhmm(rule.start)}-${hhmm(rule.end)}`;
}

function hhmm(minutes: number): string {
  return `${String(Math.floor(minutes / 60)).padStart(2, '0')}:${String(minutes % 60).padStart(2, '0')}`;
}

// ---- blackouts and time zones ----

/** The day number (days since 1970-01-01) of a real calendar date, or undefined. */
function dayNumber(ymd: string): number | undefined {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(ymd);
  if (!m) return undefined;
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const date = new Date(Date.UTC(y, mo - 1, d));
  // Date.UTC rolls 02-30 over into March (and years below 100 into the 1900s): a real date reads back.
  if (date.getUTCFullYear() !== y || date.getUTCMonth() !== mo - 1 || date.getUTCDate() !== d)
    return undefined;
  return date.getTime() / DAY;
}

function ymdOf(day: number): string {
  return new Date(day * DAY).toISOString().slice(0, 10);
}

/** `2026-12-21..2027-01-06, 2027-04-02`: local dates of the schedule's zone, ranges inclusive, as written. */
export function parseBlackouts(text: string): DateRange[] {
  if (text.trim() === '') usage(`blackout is empty (${BLACKOUT_EXPECTED})`);
  return text.split(',').map((piece) => {
    const entry = piece.trim();
    if (entry === '') usage(`blackout: an empty entry between commas (${BLACKOUT_EXPECTED})`);
    const where = `blackout "${shown(entry)}"`;
    const dates = entry.split('..').map((d) => d.trim());
    if (dates.length > 2) usage(`${where}: more than one '..' (${BLACKOUT_EXPECTED})`);
    for (const date of dates) {
      if (!/^\d{4}-\d{2}-\d{2}$/.test(date))
        usage(`${where}: '${shown(date)}' is not a date (${BLACKOUT_EXPECTED})`);
      if (dayNumber(date) === undefined) usage(`${where}: there is no date ${date} in the calendar`);
    }
    const [from, to = from] = dates as [string, string?];
    // Same-width YYYY-MM-DD texts sort as their dates do.
    if (to < from) usage(`${where}: ends before it starts (write the earlier date first)`);
    return { from, to };
  });
}

export function formatBlackouts(ranges: DateRange[]): string {
  return ranges.map((r) => (r.from === r.to ? r.from : `${r.from}..${r.to}`)).join(', ');
}

/** The canonical IANA name of a time zone Intl knows ('utc' is UTC, 'US/Eastern' America/New_York). */
export function checkTimeZone(tz: string): string {
  return formatterFor(tz.trim()).resolvedOptions().timeZone;
}

function formatterFor(tz: string): Intl.DateTimeFormat {
  try {
    if (tz === '') throw new RangeError('no time zone');
    // h23: midnight is 00, never 24; en-US: digits in a fixed order the offset reader relies on.
    return new Intl.DateTimeFormat('en-US', {
      timeZone: tz,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
  } catch (err) {
    throw new LearnerTransferError(
      'LT_USAGE',
      `time zone '${shown(tz)}' is unknown (expected an IANA name like Europe/Berlin, America/New_York or UTC)`,
      { cause: err },
    );
  }
}

// ---- a zone's offsets ----

/**
 * A zone's UTC offsets, read from Intl once per UTC day touched and kept: a 400-day question costs about
 * 400 reads of Intl (1 ms) the first time and none after. A day whose two ends have different offsets has
 * its change found to the second (tzdata's precision). Two changes inside one UTC day are assumed away
 * (no zone's rules have them).
 */
interface Zone {
  format: Intl.DateTimeFormat;
  /** UTC day number -> offset (ms, local minus UTC) at its 00:00 UTC. */
  dayStarts: Map<number, number>;
  /** UTC day number -> the first instant (ms) of the day's new offset. */
  changes: Map<number, number>;
}

const zones = new Map<string, Zone>();

function zoneOf(tz: string): Zone {
  let zone = zones.get(tz);
  if (!zone) {
    // Bounded by the names asked for; a flood of spellings only costs a rebuild.
    if (zones.size >= 1000) zones.clear();
    zone = { format: formatterFor(tz), dayStarts: new Map(), changes: new Map() };
    zones.set(tz, zone);
  }
  return zone;
}

/** Local minus UTC at `seconds` after the epoch, from Intl (format, not formatToParts: 3x faster). */
function readOffset(zone: Zone, seconds: number): number {
  const text = zone.format.format(seconds * 1000);
  const m = /(\d+)\D+(\d+)\D+(\d+)\D+(\d+)\D+(\d+)\D+(\d+)/.exec(text);
  if (!m) throw new LearnerTransferError('LT_INTERNAL', `run window: unreadable local time '${text}'`);
  const [mo, d, y, h, mi, s] = m.slice(1).map(Number) as [number, number, number, number, number, number];
  return Date.UTC(y, mo - 1, d, h, mi, s) - seconds * 1000;
}

function dayStartOffset(zone: Zone, day: number): number {
  let offset = zone.dayStarts.get(day);
  if (offset === undefined) {
    if (zone.dayStarts.size >= 100_000) {
      zone.dayStarts.clear();
      zone.changes.clear();
    }
    offset = readOffset(zone, day * 86_400);
    zone.dayStarts.set(day, offset);
  }
  return offset;
}

/** The first instant (ms) of UTC day `day` whose offset is no longer `before`. */
function changeIn(zone: Zone, day: number, before: number): number {
  let change = zone.changes.get(day);
  if (change === undefined) {
    let lo = day * 86_400;
    let hi = lo + 86_400;
    while (hi - lo > 1) {
      const mid = Math.floor((lo + hi) / 2);
      if (readOffset(zone, mid) === before) lo = mid;
      else hi = mid;
    }
    change = hi * 1000;
    zone.changes.set(day, change);
  }
  return change;
}

/**
 * A zone's offsets over a span of UTC time, as the offset at its start and each change after: a handful
 * of entries for a year, so converting a day's windows is arithmetic, not a lookup per instant.
 */
interface Timeline {
  first: number;
  changes: Array<[at: number, offset: number]>;
}

/**
 * The timeline over [fromMs, untilMs], widened by 5 days: a window starts up to a day before fromMs's
 * local day and ends up to 2 days after, a wall time is within 14 h of its instant, and its conversion
 * reads the offsets a day either side.
 */
function timeline(zone: Zone, fromMs: number, untilMs: number): Timeline {
  const firstDay = Math.floor(fromMs / DAY) - 5;
  const lastDay = Math.floor(untilMs / DAY) + 5;
  const first = dayStartOffset(zone, firstDay);
  const changes: Timeline['changes'] = [];
  let prev = first;
  for (let day = firstDay + 1; day <= lastDay; day++) {
    const offset = dayStartOffset(zone, day);
    if (offset === prev) continue;
    changes.push([changeIn(zone, day - 1, prev), offset]);
    prev = offset;
  }
  return { first, changes };
}

/** Local minus UTC, in ms, at UTC instant `t`. */
function offsetAt(tl: Timeline, t: number): number {
  let offset = tl.first;
  for (const [at, next] of tl.changes) {
    if (t < at) break;
    offset = next;
  }
  return offset;
}

/** The UTC instant of a wall time (ms as if the local clock were UTC), by the rule in the header. */
function wallToUtc(tl: Timeline, wall: number): number {
  // No zone is more than a day from UTC, so the offsets a day either side are the two in play.
  const before = offsetAt(tl, wall - DAY);
  const after = offsetAt(tl, wall + DAY);
  const a = wall - before;
  if (before === after) return a;
  const b = wall - after;
  const aReal = offsetAt(tl, a) === before;
  const bReal = offsetAt(tl, b) === after;
  if (aReal && bReal) return Math.min(a, b); // the earlier of a repeated wall time
  if (aReal) return a;
  if (bReal) return b;
  // In the gap: the change itself, the first instant after the gap (it lies between the two readings).
  const lo = Math.min(a, b);
  const hi = Math.max(a, b);
  return tl.changes.find(([at]) => at > lo && at <= hi)?.[0] ?? hi;
}

/**
 * The UTC instant (epoch ms) of local `minutes` after midnight of local date `dateYmd` in `tz`; 1440 is the
 * next midnight. A wall time in a spring gap is the first instant after the gap; a repeated one is its
 * earlier instant.
 */
export function localToUtc(dateYmd: string, minutes: number, tz: string): number {
  const day = dayNumber(dateYmd);
  if (day === undefined) usage(`date '${shown(dateYmd)}' is not a real YYYY-MM-DD date`);
  const wall = day * DAY + minutes * MINUTE;
  return wallToUtc(timeline(zoneOf(tz), wall, wall), wall);
}

/** The local day number and minutes after local midnight of UTC instant `t`. */
function localOf(tl: Timeline, t: number): { day: number; minutes: number } {
  const wall = t + offsetAt(tl, t);
  const day = Math.floor(wall / DAY);
  return { day, minutes: Math.floor((wall - day * DAY) / MINUTE) };
}

/** 0=Sun..6=Sat of a day number (1970-01-01 was a Thursday). */
const weekday = (day: number): number => (((day + 4) % 7) + 7) % 7;

// ---- open time ----

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
  // A window belongs to the day it starts on and ends by the next midnight: the day before fromMs's counts.
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

/**
 * Blackout days as UTC intervals, from local midnight to the local midnight after the last day. Each is
 * cut to `days` widened by one (still wider than any window there), so its edges stay on the timeline.
 */
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
 * The open interval containing t, or else the next one starting after t, searching at most `horizonMs`
 * ahead (default 400 days); null if none. Not clipped at t: the start may be < t when t is inside. The
 * search also looks at most `horizonMs` back, so an interval open all along is [t - horizonMs, ...),
 * and its end is clipped at t + horizonMs.
 */
export function openAt(s: RunSchedule, t: number, horizonMs: number = HORIZON_MS): [number, number] | null {
  if (!(horizonMs > 0) || !Number.isFinite(horizonMs))
    throw new RangeError(`openAt needs a horizon > 0, got ${horizonMs}`);
  // Most answers lie within days: look 8 days each way, and widen only while the answer touches an edge.
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
 * Human text at `nowMs`: "open until Tue 07:00 Europe/Berlin", "opens Mon 18:00 Europe/Berlin" (with the
 * date when more than 6 days away: "opens Mon 2027-01-11 18:00 Europe/Berlin"), or
 * "never opens (no open time in the next 400 days)".
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
