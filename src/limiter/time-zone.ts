// The time-zone engine of the run windows: a zone's offsets from Intl, and wall time to UTC
// across a DST change (a wall time in the gap is the first instant after it; a repeated one,
// its earlier instant).
import { LearnerTransferError } from '../core/errors.ts';
import { DAY, MINUTE, dayNumber, shown, usage } from './calendar.ts';

/** The canonical IANA name of a zone Intl knows ('utc' is UTC, 'US/Eastern' America/New_York). */
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

/**
 * A zone's UTC offsets, read from Intl once per UTC day touched and kept; a change is found to
 * the second. Two changes in one UTC day are assumed away (no zone has them).
 */
interface Zone {
  format: Intl.DateTimeFormat;
  /** UTC day number -> offset (ms, local minus UTC) at its 00:00 UTC. */
  dayStarts: Map<number, number>;
  /** UTC day number -> the first instant (ms) of the day's new offset. */
  changes: Map<number, number>;
}

const zones = new Map<string, Zone>();

export function zoneOf(tz: string): Zone {
  let zone = zones.get(tz);
  if (!zone) {
    // Bounded by the names asked for; a flood of spellings only costs a rebuild.
    if (zones.size >= 1000) zones.clear();
    zone = { format: formatterFor(tz), dayStarts: new Map(), changes: new Map() };
    zones.set(tz, zone);
  }
  return zone;
}

/**
 * Local minus UTC at `seconds` after the epoch, from Intl (format: 3x faster than
 * formatToParts).
 */
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
 * A zone's offsets over a span: the one at its start and each change after (a handful a year).
 */
export interface Timeline {
  first: number;
  changes: Array<[at: number, offset: number]>;
}

/**
 * The timeline over [fromMs, untilMs], widened by 5 days: a window reaches a day before and 2
 * days after, and a conversion reads a day either side.
 */
export function timeline(zone: Zone, fromMs: number, untilMs: number): Timeline {
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

/** The UTC instant of a wall time (ms as if the local clock were UTC), by the header's rule. */
export function wallToUtc(tl: Timeline, wall: number): number {
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
  // In the gap: the change itself, the first instant after the gap.
  const lo = Math.min(a, b);
  const hi = Math.max(a, b);
  return tl.changes.find(([at]) => at > lo && at <= hi)?.[0] ?? hi;
}

/**
 * The UTC instant of local `minutes` after midnight of `dateYmd` in `tz` (1440: the next
 * midnight), by the rule in the header.
 */
export function localToUtc(dateYmd: string, minutes: number, tz: string): number {
  const day = dayNumber(dateYmd);
  if (day === undefined) usage(`date '${shown(dateYmd)}' is not a real YYYY-MM-DD date`);
  const wall = day * DAY + minutes * MINUTE;
  return wallToUtc(timeline(zoneOf(tz), wall, wall), wall);
}

/** The local day number and minutes after local midnight of UTC instant `t`. */
export function localOf(tl: Timeline, t: number): { day: number; minutes: number } {
  const wall = t + offsetAt(tl, t);
  const day = Math.floor(wall / DAY);
  return { day, minutes: Math.floor((wall - day * DAY) / MINUTE) };
}
