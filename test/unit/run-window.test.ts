// The run-window calendar (src/limiter/run-window.ts): its text, and the open time it gives on fixed
// instants, DST nights of Europe/Berlin and America/New_York included. Pure: no Redis, no clock; every
// expected instant below is worked out by hand from the zone's offset (Berlin +1 CET / +2 CEST, New York
// -5 EST / -4 EDT).
import { describe, expect, it } from 'vitest';
import {
  checkTimeZone,
  describeRunWindow,
  formatBlackouts,
  formatRunWindow,
  localToUtc,
  openAt,
  openIntervals,
  parseBlackouts,
  parseRunWindow,
  type RunSchedule,
  type RunWindowRule,
} from '../../src/limiter/run-window.ts';
import { LearnerTransferError } from '../../src/core/errors.ts';

const H = 3_600_000;
const D = 24 * H;
const at = (iso: string): number => Date.parse(iso);
/** Intervals as ISO texts, so a failure reads as times. */
const iso = (intervals: Array<[number, number]>): string[][] =>
  intervals.map(([a, b]) => [new Date(a).toISOString(), new Date(b).toISOString()]);
const z = (hhmm: string, day: string): string => `${day}T${hhmm}:00.000Z`;

function schedule(window: string, tz = 'Europe/Berlin', blackout?: string): RunSchedule {
  return {
    windows: window === '' ? [] : parseRunWindow(window),
    tz,
    blackouts: blackout ? parseBlackouts(blackout) : [],
  };
}

/** The usage error `fn` throws: LT_USAGE, with its message. */
function usageMessage(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(LearnerTransferError);
    expect((err as LearnerTransferError).code).toBe('LT_USAGE');
    return (err as Error).message;
  }
  throw new Error('expected a usage error');
}

describe('parseRunWindow', () => {
  it('reads days then hours, entries separated by commas, in the order written', () => {
    expect(parseRunWindow('Mon-Fri 18:00-07:00, Sat-Sun all')).toEqual([
      { days: [1, 2, 3, 4, 5], start: 1080, end: 420, all: false },
      { days: [0, 6], start: 0, end: 1440, all: true },
    ]);
  });

  it('reads one day, all days, any case, and spaces around the dashes', () => {
    expect(parseRunWindow('sat 08:00-12:30')).toEqual([{ days: [6], start: 480, end: 750, all: false }]);
    expect(parseRunWindow('ALL 9:05-17:00')).toEqual([
      { days: [0, 1, 2, 3, 4, 5, 6], start: 545, end: 1020, all: false },
    ]);
    expect(parseRunWindow('all all')).toEqual([
      { days: [0, 1, 2, 3, 4, 5, 6], start: 0, end: 1440, all: true },
    ]);
    expect(parseRunWindow('  mon - FRI   18:00 - 07:00 ')).toEqual(parseRunWindow('Mon-Fri 18:00-07:00'));
  });

  it('wraps a day range over the week end, and a range round the whole week is every day', () => {
    expect(parseRunWindow('Fri-Mon 20:00-06:00')[0]!.days).toEqual([0, 1, 5, 6]);
    expect(parseRunWindow('Sun-Sat all')[0]!.days).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(parseRunWindow('Wed-Tue all')[0]!.days).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(parseRunWindow('Tue-Tue all')[0]!.days).toEqual([2]);
  });

  it('takes 24:00 as an end, and an end at 00:00 as the same next midnight', () => {
    expect(parseRunWindow('Fri 18:00-24:00')[0]).toEqual({ days: [5], start: 1080, end: 1440, all: false });
    expect(parseRunWindow('Fri 18:00-00:00')[0]).toEqual({ days: [5], start: 1080, end: 1440, all: false });
  });

  it('names the bad piece and shows the expected form', () => {
    expect(usageMessage(() => parseRunWindow('Mon-Fry 18:00-07:00'))).toBe(
      `run window "Mon-Fry 18:00-07:00": unknown day 'Fry' (expected Mon..Sun, a range like Mon-Fri, or all)`,
    );
    expect(usageMessage(() => parseRunWindow('Mon-Fri 18:00-07:00, Monday all'))).toBe(
      `run window "Monday all": unknown day 'Monday' (expected Mon..Sun, a range like Mon-Fri, or all)`,
    );
    expect(usageMessage(() => parseRunWindow('Mon-Wed-Fri all'))).toMatch(
      /^run window "Mon-Wed-Fri all": 'Mon-Wed-Fri' is not a day, a range or all \(expected Mon\.\.Sun/,
    );
    expect(usageMessage(() => parseRunWindow('Mon-Fri 18-07'))).toBe(
      `run window "Mon-Fri 18-07": hours '18-07' are not HH:MM-HH:MM (expected like 18:00-07:00, or all)`,
    );
    expect(usageMessage(() => parseRunWindow('Mon 25:00-07:00'))).toBe(
      `run window "Mon 25:00-07:00": '25:00' is not a time of day (expected 00:00 to 23:59, or 24:00 as an end)`,
    );
    expect(usageMessage(() => parseRunWindow('Mon 18:60-07:00'))).toMatch(/'18:60' is not a time of day/);
    expect(usageMessage(() => parseRunWindow('Mon 24:00-07:00'))).toMatch(/: 24:00 can only end a window/);
  });

  it('refuses a window that starts where it ends: that is a whole day, written all', () => {
    expect(usageMessage(() => parseRunWindow('Mon 18:00-18:00'))).toBe(
      'run window "Mon 18:00-18:00": starts and ends at 18:00 (use all for a whole day)',
    );
    expect(usageMessage(() => parseRunWindow('Mon 00:00-24:00'))).toMatch(/use all for a whole day/);
    expect(usageMessage(() => parseRunWindow('Mon 00:00-00:00'))).toMatch(/use all for a whole day/);
  });

  it('refuses entries without days and hours, and empty text or entries', () => {
    expect(usageMessage(() => parseRunWindow('Mon-Fri'))).toMatch(
      /^run window "Mon-Fri": expected DAYS HOURS, like "Mon-Fri 18:00-07:00"/,
    );
    expect(usageMessage(() => parseRunWindow('Mon Wed 18:00-07:00'))).toMatch(/expected DAYS HOURS/);
    expect(usageMessage(() => parseRunWindow('  '))).toMatch(/^run window is empty \(expected entries like/);
    expect(usageMessage(() => parseRunWindow('Sat all,'))).toMatch(/an empty entry between commas/);
  });

  it('echoes no terminal control sequence from the text it refuses', () => {
    const message = usageMessage(() => parseRunWindow('M\u001b[2Jon all'));
    expect(message).not.toContain('\u001b');
    expect(message).toContain(`unknown day 'M\\u001b[2Jon'`);
  });
});

describe('formatRunWindow', () => {
  it('writes the canonical text, which reads back to the same rules', () => {
    const cases: Array<[string, string]> = [
      ['mon-fri 18:00-07:00 ,SAT-sun ALL', 'Mon-Fri 18:00-07:00, Sat-Sun all'],
      ['Fri-Mon 20:00-06:00', 'Fri-Mon 20:00-06:00'],
      ['Mon-Sun 9:05-17:00', 'all 09:05-17:00'],
      ['Sun 18:00-00:00', 'Sun 18:00-24:00'],
      ['Sat-Sun all, Fri 18:00-24:00', 'Sat-Sun all, Fri 18:00-24:00'],
      ['Tue 00:00-00:01, Thu 23:59-00:00', 'Tue 00:00-00:01, Thu 23:59-24:00'],
    ];
    for (const [text, canonical] of cases) {
      const rules = parseRunWindow(text);
      expect(formatRunWindow(rules)).toBe(canonical);
      expect(parseRunWindow(formatRunWindow(rules))).toEqual(rules);
    }
  });

  it('writes days that are not one run of the week (built in code) as one entry per run', () => {
    const rule: RunWindowRule = { days: [0, 1, 3, 6], start: 480, end: 540, all: false };
    const text = formatRunWindow([rule]);
    expect(text).toBe('Wed 08:00-09:00, Sat-Mon 08:00-09:00');
    expect(
      parseRunWindow(text)
        .flatMap((r) => r.days)
        .sort(),
    ).toEqual([0, 1, 3, 6]);
  });
});

describe('parseBlackouts and formatBlackouts', () => {
  it('reads dates and inclusive ranges, and writes them back', () => {
    const ranges = parseBlackouts('2026-12-21..2027-01-06, 2027-04-02 , 2028-02-29..2028-03-01');
    expect(ranges).toEqual([
      { from: '2026-12-21', to: '2027-01-06' },
      { from: '2027-04-02', to: '2027-04-02' },
      { from: '2028-02-29', to: '2028-03-01' },
    ]);
    expect(formatBlackouts(ranges)).toBe('2026-12-21..2027-01-06, 2027-04-02, 2028-02-29..2028-03-01');
    expect(parseBlackouts(formatBlackouts(ranges))).toEqual(ranges);
  });

  it('refuses dates the calendar does not have, backwards ranges, and other shapes', () => {
    expect(usageMessage(() => parseBlackouts('2026-02-30'))).toBe(
      'blackout "2026-02-30": there is no date 2026-02-30 in the calendar',
    );
    expect(usageMessage(() => parseBlackouts('2026-12-21..2026-02-29'))).toMatch(
      /there is no date 2026-02-29/,
    );
    expect(usageMessage(() => parseBlackouts('2026-13-01'))).toMatch(/there is no date 2026-13-01/);
    expect(usageMessage(() => parseBlackouts('2027-01-06..2026-12-21'))).toBe(
      'blackout "2027-01-06..2026-12-21": ends before it starts (write the earlier date first)',
    );
    expect(usageMessage(() => parseBlackouts('12/21/2026'))).toBe(
      `blackout "12/21/2026": '12/21/2026' is not a date (expected YYYY-MM-DD or YYYY-MM-DD..YYYY-MM-DD, like 2026-12-21..2027-01-06)`,
    );
    expect(usageMessage(() => parseBlackouts('2026-12-21..2026-12-22..2026-12-23'))).toMatch(
      /more than one '\.\.'/,
    );
    expect(usageMessage(() => parseBlackouts(''))).toMatch(/^blackout is empty/);
    expect(usageMessage(() => parseBlackouts('2026-12-21,,2026-12-24'))).toMatch(
      /an empty entry between commas/,
    );
  });
});

describe('checkTimeZone', () => {
  it('gives the canonical IANA name', () => {
    expect(checkTimeZone('Europe/Berlin')).toBe('Europe/Berlin');
    expect(checkTimeZone(' America/New_York ')).toBe('America/New_York');
    expect(checkTimeZone('utc')).toBe('UTC');
    expect(checkTimeZone('US/Eastern')).toBe('America/New_York');
  });

  it('refuses a name Intl does not know, with an example', () => {
    expect(usageMessage(() => checkTimeZone('Europe/Berln'))).toBe(
      "time zone 'Europe/Berln' is unknown (expected an IANA name like Europe/Berlin, America/New_York or UTC)",
    );
    expect(usageMessage(() => checkTimeZone(''))).toMatch(/is unknown/);
    expect(usageMessage(() => openIntervals(schedule('all all', 'Mars/Olympus'), 0, D))).toMatch(
      /Mars\/Olympus/,
    );
  });
});

describe('localToUtc', () => {
  it('converts with the offset in force, 1440 being the next midnight', () => {
    expect(localToUtc('2026-07-01', 18 * 60, 'Europe/Berlin')).toBe(at('2026-07-01T16:00Z'));
    expect(localToUtc('2026-01-15', 18 * 60, 'Europe/Berlin')).toBe(at('2026-01-15T17:00Z'));
    expect(localToUtc('2026-07-01', 1440, 'Europe/Berlin')).toBe(at('2026-07-01T22:00Z'));
    expect(localToUtc('2026-07-01', 0, 'UTC')).toBe(at('2026-07-01T00:00Z'));
    expect(localToUtc('2026-07-01', 0, 'America/New_York')).toBe(at('2026-07-01T04:00Z'));
  });

  it('maps a wall time in the spring gap to the first instant after it (03:00 local)', () => {
    // Berlin 2026-03-29: 02:00 CET becomes 03:00 CEST at 01:00Z.
    expect(localToUtc('2026-03-29', 120, 'Europe/Berlin')).toBe(at('2026-03-29T01:00Z'));
    expect(localToUtc('2026-03-29', 150, 'Europe/Berlin')).toBe(at('2026-03-29T01:00Z'));
    expect(localToUtc('2026-03-29', 180, 'Europe/Berlin')).toBe(at('2026-03-29T01:00Z'));
    expect(localToUtc('2026-03-29', 119, 'Europe/Berlin')).toBe(at('2026-03-29T00:59Z'));
    // New York 2026-03-08: 02:00 EST becomes 03:00 EDT at 07:00Z.
    expect(localToUtc('2026-03-08', 150, 'America/New_York')).toBe(at('2026-03-08T07:00Z'));
  });

  it('maps a wall time that happens twice (autumn) to its earlier instant', () => {
    // Berlin 2026-10-25: 03:00 CEST becomes 02:00 CET at 01:00Z; 02:00-02:59 happens twice.
    expect(localToUtc('2026-10-25', 120, 'Europe/Berlin')).toBe(at('2026-10-25T00:00Z'));
    expect(localToUtc('2026-10-25', 150, 'Europe/Berlin')).toBe(at('2026-10-25T00:30Z'));
    expect(localToUtc('2026-10-25', 180, 'Europe/Berlin')).toBe(at('2026-10-25T02:00Z'));
    // New York 2026-11-01: 02:00 EDT becomes 01:00 EST at 06:00Z; 01:00-01:59 happens twice.
    expect(localToUtc('2026-11-01', 90, 'America/New_York')).toBe(at('2026-11-01T05:30Z'));
    expect(localToUtc('2026-11-01', 120, 'America/New_York')).toBe(at('2026-11-01T07:00Z'));
  });

  it('refuses a date that is not one', () => {
    expect(usageMessage(() => localToUtc('2026-02-30', 0, 'UTC'))).toMatch(/'2026-02-30' is not a real/);
  });
});

describe('openIntervals', () => {
  it('gives windows across midnight on the days they start, clipped to the span asked', () => {
    const s = schedule('Mon-Fri 18:00-07:00');
    // Mon 2026-06-15 to Mon 2026-06-22 (CEST): Mon..Fri 18:00 -> next day 07:00, nothing from Sunday.
    expect(iso(openIntervals(s, at('2026-06-15T00:00Z'), at('2026-06-22T00:00Z')))).toEqual([
      [z('16:00', '2026-06-15'), z('05:00', '2026-06-16')],
      [z('16:00', '2026-06-16'), z('05:00', '2026-06-17')],
      [z('16:00', '2026-06-17'), z('05:00', '2026-06-18')],
      [z('16:00', '2026-06-18'), z('05:00', '2026-06-19')],
      [z('16:00', '2026-06-19'), z('05:00', '2026-06-20')],
    ]);
    // Starting inside Monday's window (it began the day before the span's first local day).
    expect(iso(openIntervals(s, at('2026-06-16T02:00Z'), at('2026-06-16T20:00Z')))).toEqual([
      [z('02:00', '2026-06-16'), z('05:00', '2026-06-16')],
      [z('16:00', '2026-06-16'), z('20:00', '2026-06-16')],
    ]);
  });

  it('gives whole local days for all, and wraps day ranges over the week end', () => {
    expect(
      iso(openIntervals(schedule('Sat-Sun all'), at('2026-06-15T00:00Z'), at('2026-06-29T00:00Z'))),
    ).toEqual([
      [z('22:00', '2026-06-19'), z('22:00', '2026-06-21')],
      [z('22:00', '2026-06-26'), z('22:00', '2026-06-28')],
    ]);
    const wrapped = schedule('Fri-Mon 20:00-06:00', 'UTC');
    expect(iso(openIntervals(wrapped, at('2026-06-15T00:00Z'), at('2026-06-22T12:00Z')))).toEqual([
      [z('00:00', '2026-06-15'), z('06:00', '2026-06-15')],
      [z('20:00', '2026-06-15'), z('06:00', '2026-06-16')],
      [z('20:00', '2026-06-19'), z('06:00', '2026-06-20')],
      [z('20:00', '2026-06-20'), z('06:00', '2026-06-21')],
      [z('20:00', '2026-06-21'), z('06:00', '2026-06-22')],
    ]);
  });

  it('joins adjacent and overlapping windows into one interval', () => {
    const from = at('2026-06-17T00:00Z');
    const until = at('2026-06-24T00:00Z');
    // Fri 18:00 -> Mon 00:00 (CEST), one interval.
    expect(iso(openIntervals(schedule('Sat-Sun all, Fri 18:00-24:00'), from, until))).toEqual([
      [z('16:00', '2026-06-19'), z('22:00', '2026-06-21')],
    ]);
    // Friday's night overlaps Saturday's whole day; Monday's evening is apart again.
    expect(iso(openIntervals(schedule('Mon-Fri 18:00-07:00, Sat-Sun all'), from, until))).toEqual([
      [z('00:00', '2026-06-17'), z('05:00', '2026-06-17')], // Tuesday's night, clipped to the span
      [z('16:00', '2026-06-17'), z('05:00', '2026-06-18')],
      [z('16:00', '2026-06-18'), z('05:00', '2026-06-19')],
      [z('16:00', '2026-06-19'), z('22:00', '2026-06-21')],
      [z('16:00', '2026-06-22'), z('05:00', '2026-06-23')],
      [z('16:00', '2026-06-23'), z('00:00', '2026-06-24')],
    ]);
  });

  it('treats no run window as always open, blackouts still closing', () => {
    const from = at('2026-12-20T00:00Z');
    const until = at('2027-01-10T00:00Z');
    expect(openIntervals(schedule(''), from, until)).toEqual([[from, until]]);
    expect(iso(openIntervals(schedule('', 'Europe/Berlin', '2026-12-24..2027-01-01'), from, until))).toEqual([
      [z('00:00', '2026-12-20'), z('23:00', '2026-12-23')],
      [z('23:00', '2027-01-01'), z('00:00', '2027-01-10')],
    ]);
  });

  it('gives nothing for an empty or reversed span, and refuses a span without end', () => {
    const s = schedule('all all');
    expect(openIntervals(s, at('2026-06-15T00:00Z'), at('2026-06-15T00:00Z'))).toEqual([]);
    expect(openIntervals(s, at('2026-06-16T00:00Z'), at('2026-06-15T00:00Z'))).toEqual([]);
    expect(() => openIntervals(s, 0, Infinity)).toThrow(RangeError);
  });
});

describe('openIntervals across DST changes', () => {
  const night = (tz: string, saturday: string): number[] =>
    openIntervals(
      schedule('Sat 18:00-07:00', tz),
      at(`${saturday}T00:00Z`),
      at(`${saturday}T00:00Z`) + 3 * D,
    ).flat();

  it('Europe/Berlin: the spring night lasts 12 h, the autumn night 14 h', () => {
    // 2026-03-28 18:00 CET = 17:00Z -> 2026-03-29 07:00 CEST = 05:00Z.
    expect(night('Europe/Berlin', '2026-03-28')).toEqual([at('2026-03-28T17:00Z'), at('2026-03-29T05:00Z')]);
    // 2026-10-24 18:00 CEST = 16:00Z -> 2026-10-25 07:00 CET = 06:00Z.
    expect(night('Europe/Berlin', '2026-10-24')).toEqual([at('2026-10-24T16:00Z'), at('2026-10-25T06:00Z')]);
    const [a, b] = night('Europe/Berlin', '2026-03-28') as [number, number];
    const [c, d] = night('Europe/Berlin', '2026-10-24') as [number, number];
    expect([(b - a) / H, (d - c) / H]).toEqual([12, 14]);
  });

  it('America/New_York: the spring night lasts 12 h, the autumn night 14 h', () => {
    // 2026-03-07 18:00 EST = 23:00Z -> 2026-03-08 07:00 EDT = 11:00Z.
    expect(night('America/New_York', '2026-03-07')).toEqual([
      at('2026-03-07T23:00Z'),
      at('2026-03-08T11:00Z'),
    ]);
    // 2026-10-31 18:00 EDT = 22:00Z -> 2026-11-01 07:00 EST = 12:00Z.
    expect(night('America/New_York', '2026-10-31')).toEqual([
      at('2026-10-31T22:00Z'),
      at('2026-11-01T12:00Z'),
    ]);
  });

  it('loses and doubles no night around the change (nightly 18:00-07:00)', () => {
    const s = schedule('all 18:00-07:00');
    const nights = openIntervals(s, at('2026-03-27T12:00Z'), at('2026-03-30T12:00Z'));
    expect(iso(nights)).toEqual([
      [z('17:00', '2026-03-27'), z('06:00', '2026-03-28')],
      [z('17:00', '2026-03-28'), z('05:00', '2026-03-29')],
      [z('16:00', '2026-03-29'), z('05:00', '2026-03-30')],
    ]);
    expect(nights.map(([a, b]) => (b - a) / H)).toEqual([13, 12, 13]);
  });

  it('drops a window wholly in the spring gap, and keeps what is after the gap', () => {
    const from = at('2026-03-28T00:00Z');
    const until = at('2026-04-06T00:00Z');
    // Sun 2026-03-29 02:00-03:00 does not exist in Berlin; a week later it is 00:00Z-01:00Z (CEST).
    expect(iso(openIntervals(schedule('Sun 02:00-03:00'), from, until))).toEqual([
      [z('00:00', '2026-04-05'), z('01:00', '2026-04-05')],
    ]);
    expect(iso(openIntervals(schedule('Sun 02:30-04:00'), from, at('2026-03-30T00:00Z')))).toEqual([
      [z('01:00', '2026-03-29'), z('02:00', '2026-03-29')],
    ]);
    expect(
      openIntervals(
        schedule('Sun 02:00-03:00', 'America/New_York'),
        at('2026-03-07T00:00Z'),
        at('2026-03-09T12:00Z'),
      ),
    ).toEqual([]);
  });

  it('gives the repeated autumn hour both times (2 h), with no seam between windows meeting in it', () => {
    const from = at('2026-10-24T00:00Z');
    const until = at('2026-10-26T00:00Z');
    // Berlin 02:00 (CEST, 00:00Z) to 03:00 (CET, 02:00Z).
    expect(iso(openIntervals(schedule('Sun 02:00-03:00'), from, until))).toEqual([
      [z('00:00', '2026-10-25'), z('02:00', '2026-10-25')],
    ]);
    // New York repeats 01:00-02:00: 01:00 EDT = 05:00Z to 02:00 EST = 07:00Z.
    const ny = schedule('Sun 01:00-02:00', 'America/New_York');
    expect(iso(openIntervals(ny, at('2026-10-31T00:00Z'), at('2026-11-02T00:00Z')))).toEqual([
      [z('05:00', '2026-11-01'), z('07:00', '2026-11-01')],
    ]);
    // Both ends at the repeated 02:30 are its earlier instant, so the two windows touch and join.
    expect(iso(openIntervals(schedule('Sun 00:00-02:30, Sun 02:30-05:00'), from, until))).toEqual([
      [z('22:00', '2026-10-24'), z('04:00', '2026-10-25')],
    ]);
  });
});

describe('blackouts', () => {
  it('cut windows at local midnight, on both sides of a blacked-out day', () => {
    const s = schedule('Mon-Fri 18:00-07:00', 'Europe/Berlin', '2026-06-17');
    expect(iso(openIntervals(s, at('2026-06-16T00:00Z'), at('2026-06-18T12:00Z')))).toEqual([
      [z('00:00', '2026-06-16'), z('05:00', '2026-06-16')], // Monday's night, clipped to the span
      [z('16:00', '2026-06-16'), z('22:00', '2026-06-16')], // Tuesday's night ends at Wednesday 00:00
      [z('22:00', '2026-06-17'), z('05:00', '2026-06-18')], // Wednesday's night opens at Thursday 00:00
    ]);
  });

  it('close over New Year, across the year boundary', () => {
    const s = schedule('Mon-Fri 18:00-07:00, Sat-Sun all', 'Europe/Berlin', '2026-12-21..2027-01-06');
    expect(iso(openIntervals(s, at('2026-12-18T00:00Z'), at('2027-01-09T00:00Z')))).toEqual([
      [z('00:00', '2026-12-18'), z('06:00', '2026-12-18')], // Thursday's night, clipped to the span
      [z('17:00', '2026-12-18'), z('23:00', '2026-12-20')], // Fri 18:00 CET to the blackout's first midnight
      [z('23:00', '2027-01-06'), z('06:00', '2027-01-07')], // Wednesday's night, from Thursday 00:00
      [z('17:00', '2027-01-07'), z('06:00', '2027-01-08')],
      [z('17:00', '2027-01-08'), z('00:00', '2027-01-09')],
    ]);
    const ny = schedule('all all', 'America/New_York', '2026-12-31..2027-01-01');
    expect(iso(openIntervals(ny, at('2026-12-30T00:00Z'), at('2027-01-04T00:00Z')))).toEqual([
      [z('00:00', '2026-12-30'), z('05:00', '2026-12-31')],
      [z('05:00', '2027-01-02'), z('00:00', '2027-01-04')],
    ]);
  });

  it('far from the span change nothing, and one covering it closes it all', () => {
    const s = schedule('all all', 'Europe/Berlin', '2020-01-01..2020-12-31, 2030-01-01');
    const from = at('2026-06-01T00:00Z');
    expect(openIntervals(s, from, from + 400 * D)).toEqual([[from, from + 400 * D]]);
    const closed = schedule('all all', 'Europe/Berlin', '2025-01-01..2028-12-31');
    expect(openIntervals(closed, from, from + 400 * D)).toEqual([]);
  });
});

describe('openAt', () => {
  const s = schedule('Mon-Fri 18:00-07:00');

  it('gives the interval containing t, not clipped at t', () => {
    expect(iso([openAt(s, at('2026-06-15T20:00Z'))!])).toEqual([
      [z('16:00', '2026-06-15'), z('05:00', '2026-06-16')],
    ]);
  });

  it('counts an exact start as inside and an exact end as outside (then the next one)', () => {
    expect(openAt(s, at('2026-06-15T16:00Z'))).toEqual([at('2026-06-15T16:00Z'), at('2026-06-16T05:00Z')]);
    expect(openAt(s, at('2026-06-16T05:00Z'))).toEqual([at('2026-06-16T16:00Z'), at('2026-06-17T05:00Z')]);
    expect(openAt(s, at('2026-06-16T04:59:59.999Z'))).toEqual([
      at('2026-06-15T16:00Z'),
      at('2026-06-16T05:00Z'),
    ]);
  });

  it('finds the next one over a weekend, or null beyond the horizon', () => {
    expect(openAt(s, at('2026-06-20T12:00Z'))).toEqual([at('2026-06-22T16:00Z'), at('2026-06-23T05:00Z')]);
    expect(openAt(s, at('2026-06-20T12:00Z'), D)).toBeNull();
  });

  it('finds an interval that starts or ends more than a week away', () => {
    const weekend = schedule('Sat-Sun all', 'Europe/Berlin', '2026-06-20..2026-07-31');
    expect(openAt(weekend, at('2026-06-16T12:00Z'))).toEqual([
      at('2026-07-31T22:00Z'),
      at('2026-08-02T22:00Z'),
    ]);
    const holiday = schedule('', 'Europe/Berlin', '2026-06-01..2026-06-02, 2026-09-01');
    expect(openAt(holiday, at('2026-07-01T12:00Z'))).toEqual([
      at('2026-06-02T22:00Z'),
      at('2026-08-31T22:00Z'),
    ]);
  });

  it('bounds an interval open all along by the horizon, both ways', () => {
    const t = at('2026-06-15T12:00Z');
    expect(openAt(schedule('all all'), t)).toEqual([t - 400 * D, t + 400 * D]);
    expect(openAt(schedule(''), t, 10 * D)).toEqual([t - 10 * D, t + 10 * D]);
  });

  it('gives null when no open time is left in the horizon', () => {
    const closed = schedule('all all', 'Europe/Berlin', '2026-01-01..2027-12-31');
    expect(openAt(closed, at('2026-06-01T00:00Z'))).toBeNull();
  });
});

describe('describeRunWindow', () => {
  const s = schedule('Mon-Fri 18:00-07:00, Sat-Sun all');

  it('says until when an open window lasts, or when the next one opens', () => {
    expect(describeRunWindow(schedule('Mon-Fri 18:00-07:00'), at('2026-06-15T20:00Z'))).toBe(
      'open until Tue 07:00 Europe/Berlin',
    );
    expect(describeRunWindow(s, at('2026-06-17T12:00Z'))).toBe('opens Wed 18:00 Europe/Berlin');
    // Sat-Sun all ends at Monday 00:00; Monday's own window opens at 18:00.
    expect(describeRunWindow(s, at('2026-06-20T12:00Z'))).toBe('open until Mon 00:00 Europe/Berlin');
    expect(
      describeRunWindow(schedule('Mon-Fri 18:00-07:00', 'America/New_York'), at('2026-06-20T12:00Z')),
    ).toBe('opens Mon 18:00 America/New_York');
  });

  it('adds the date when the time is more than 6 days away', () => {
    const winter = schedule('Mon-Fri 18:00-07:00', 'Europe/Berlin', '2026-12-21..2027-01-10');
    expect(describeRunWindow(winter, at('2026-12-22T12:00Z'))).toBe(
      'opens Mon 2027-01-11 18:00 Europe/Berlin',
    );
    const monday = schedule('Mon 18:00-19:00');
    // Tue 2026-06-16 18:00 CEST: the next Monday 18:00 is exactly 6 days away, then just over.
    expect(describeRunWindow(monday, at('2026-06-16T16:00Z'))).toBe('opens Mon 18:00 Europe/Berlin');
    expect(describeRunWindow(monday, at('2026-06-16T16:00Z') - 1)).toBe(
      'opens Mon 2026-06-22 18:00 Europe/Berlin',
    );
    const summer = schedule('all all', 'Europe/Berlin', '2026-07-01..2026-07-02');
    expect(describeRunWindow(summer, at('2026-06-15T12:00Z'))).toBe(
      'open until Wed 2026-07-01 00:00 Europe/Berlin',
    );
  });

  it('says never opens when no open time is left in 400 days', () => {
    const closed = schedule('all all', 'Europe/Berlin', '2026-01-01..2027-12-31');
    expect(describeRunWindow(closed, at('2026-06-01T00:00Z'))).toBe(
      'never opens (no open time in the next 400 days)',
    );
    expect(openIntervals(closed, at('2026-06-01T00:00Z'), at('2026-06-01T00:00Z') + 400 * D)).toEqual([]);
  });

  it('says when there is nothing to wait for', () => {
    expect(describeRunWindow(schedule(''), at('2026-06-15T12:00Z'))).toBe('always open (no run window set)');
    expect(describeRunWindow(schedule('all all'), at('2026-06-15T12:00Z'))).toBe(
      'open (no closing time in the next 400 days)',
    );
  });
});

describe('openIntervals against a walk of the local clock', () => {
  /**
   * An independent reading of the rules: at instant t, read the local date and time with Intl and ask
   * whether a rule covers it (a window across midnight covers the next day until its end) and the local
   * date is not blacked out. Window edges here stay out of the repeated autumn hour, where the module
   * takes the earlier instant on purpose and a clock reading cannot tell the two apart.
   */
  const clocks = new Map<string, Intl.DateTimeFormat>();
  function openByClock(s: RunSchedule, t: number): boolean {
    const clock =
      clocks.get(s.tz) ??
      new Intl.DateTimeFormat('en-CA', {
        timeZone: s.tz,
        hourCycle: 'h23',
        year: 'numeric',
        month: '2-digit',
        day: '2-digit',
        hour: '2-digit',
        minute: '2-digit',
      });
    clocks.set(s.tz, clock);
    const parts = clock.formatToParts(t);
    const part = (type: string): string => parts.find((p) => p.type === type)!.value;
    const ymd = `${part('year')}-${part('month')}-${part('day')}`;
    if (s.blackouts.some((b) => b.from <= ymd && ymd <= b.to)) return false;
    const minutes = Number(part('hour')) * 60 + Number(part('minute'));
    const weekday = new Date(`${ymd}T00:00Z`).getUTCDay();
    return s.windows.some(({ days, start, end }) =>
      end > start
        ? days.includes(weekday) && minutes >= start && minutes < end
        : (days.includes(weekday) && minutes >= start) || (days.includes((weekday + 6) % 7) && minutes < end),
    );
  }

  // Each span holds a DST change (but Kolkata's) and a blackout next to it.
  const cases: Array<[tz: string, from: string, blackout: string]> = [
    ['Europe/Berlin', '2026-03-15', '2026-03-27, 2026-04-08..2026-04-09'],
    ['Europe/Berlin', '2026-10-11', '2026-10-26'],
    ['America/New_York', '2026-02-22', '2026-03-06..2026-03-07'],
    ['America/New_York', '2026-10-18', '2026-11-02'],
    ['Australia/Sydney', '2026-03-22', '2026-04-04'], // autumn there: 2026-04-05
    ['America/Santiago', '2026-08-23', '2026-09-05'], // 2026-09-06 00:00 does not exist there
    ['Asia/Kolkata', '2026-06-01', '2026-06-10'], // +05:30, no DST
  ];

  it.each(cases)('%s from %s, six weeks in quarter hours', (tz, from, blackout) => {
    const start = at(`${from}T00:00Z`);
    const until = start + 42 * D;
    const s = schedule('Mon-Fri 18:00-07:00, Sat-Sun all, Wed 09:30-10:45', tz, blackout);
    const open = openIntervals(s, start, until);
    const mismatches: string[] = [];
    for (let t = start; t < until; t += 15 * 60_000) {
      const inside = open.some(([a, b]) => a <= t && t < b);
      if (inside !== openByClock(s, t)) mismatches.push(new Date(t).toISOString());
    }
    expect(mismatches).toEqual([]);
    expect(open.length).toBeGreaterThan(20);
  });
});
