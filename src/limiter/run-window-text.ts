// The run windows as text (run-window.ts): `Mon-Fri 18:00-07:00, Sat-Sun all` and blackouts like
// `2026-12-21..2027-01-06`, read into rules and written back in one canonical form.
import { dayNumber, DAY_NAMES, hhmm, shown, usage } from './calendar.ts';

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
  /** Minutes after local midnight, 1..1440; end <= start is on the next day. */
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

const DAY_INDEX = new Map(DAY_NAMES.map((name, i) => [name.toLowerCase(), i]));
const ALL_DAYS = [0, 1, 2, 3, 4, 5, 6];
const WINDOW_EXAMPLE = '"Mon-Fri 18:00-07:00, Sat-Sun all"';
const DAYS_EXPECTED = 'expected Mon..Sun, a range like Mon-Fri, or all';
const BLACKOUT_EXPECTED = 'expected YYYY-MM-DD or YYYY-MM-DD..YYYY-MM-DD, like 2026-12-21..2027-01-06';

/** `Mon-Fri 18:00-07:00, Sat-Sun all`: one rule per comma-separated entry, in order. */
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
 * The canonical text of rules, which parseRunWindow reads back to equal rules; days not one run
 * of the week (Mon and Wed) become one entry per run.
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

/** `2026-12-21..2027-01-06, 2027-04-02`: local dates, ranges inclusive, as written. */
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
