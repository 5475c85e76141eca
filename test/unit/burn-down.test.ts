// The burn-down: learners left read backwards from the hourly records (ops/eta/burn-down.ts) and its SVG
// (dashboard/views/burn-down.ts): the points, the projected finish, dates in the labels, escaping, and
// the empty case. Pure: no Redis, no clock.
import { describe, expect, it } from 'vitest';
import {
  finishOf,
  formatDate,
  formatSpan,
  orgBurnDown,
  runBurnDown,
  runFinishOf,
  type BurnDown,
} from '../../src/ops/eta/burn-down.ts';
import type { Eta } from '../../src/ops/eta/eta.ts';
import type { HourBucket } from '../../src/outcomes/hourly.ts';
import { axisDate, burnDownSvg, H, niceMax, PLOT, W } from '../../src/dashboard/views/burn-down.ts';
import { humanRate, humanRateText, num, perWindow } from '../../src/dashboard/views/units.ts';

const HOUR = 3_600_000;
const DAY = 86_400_000;
/** Thu 10 Dec 2026 09:30 UTC. */
const NOW = Date.UTC(2026, 11, 10, 9, 30);
const hourStart = (k: number) => Math.floor(NOW / HOUR) * HOUR - k * HOUR;
const bucket = (hoursAgo: number, finished?: number, byRun: Record<string, number> = {}): HourBucket => ({
  hour: new Date(hourStart(hoursAgo)).toISOString(),
  counts: { transferred: finished ?? 1 },
  ...(finished === undefined ? {} : { finished, finishedByRun: byRun }),
});

function eta(more: Partial<Eta>): Eta {
  return {
    ms: 0,
    boundBy: 'org',
    availableNow: 0,
    text: 'the ETA text',
    finishAt: null,
    finishUtc: null,
    limitedBy: '',
    heldBy: '',
    windows: 1,
    tokens: 1,
    paused: false,
    ...more,
  };
}

const finishIn = (ms: number) => eta({ ms, finishAt: NOW + ms, text: 'done by ...' });

describe('the learners left, read backwards from the hourly records', () => {
  it('adds back what finished after each hour, oldest first, now last', () => {
    const b = orgBurnDown([bucket(2, 10), bucket(1, 20), bucket(0, 5)], 100, NOW, finishIn(DAY), []);
    expect(b.points).toEqual([
      [hourStart(2), 135],
      [hourStart(1), 125],
      [hourStart(0), 105],
      [NOW, 100],
    ]);
    expect(b.partial).toBe(false);
    expect(b.finishAt).toBe(NOW + DAY);
  });

  it('takes out, before its creation, the learners of a run created in the span', () => {
    // A run of 50 created 80 min ago (08:10): 30 of them finished since, 20 left (of the 100 left now).
    const created = NOW - 80 * 60_000;
    const hours = [bucket(3, 10), bucket(1, 15, { r2: 10 }), bucket(0, 20, { r2: 20 })];
    const b = orgBurnDown(hours, 100, NOW, finishIn(DAY), [{ id: 'r2', createdAt: created, left: 20 }]);
    // At hourStart(3): 100 + 45 finished since, less the run's 50 that were not there yet.
    expect(b.points[0]).toEqual([hourStart(3), 95]);
    expect(b.points.find((p) => p[0] === hourStart(1))?.[1]).toBe(100 + 35 - 50);
    expect(b.points.find((p) => p[0] === hourStart(0))?.[1]).toBe(120);
    // Its creation is a step: just before it and at it.
    expect(b.points.filter((p) => p[0] === created)).toEqual([
      [created, 85],
      [created, 135],
    ]);
  });

  it('says when an hour of the span was recorded without final counts', () => {
    const b = orgBurnDown([bucket(2), bucket(1, 4)], 10, NOW, finishIn(HOUR), []);
    expect(b.partial).toBe(true);
    expect(b.points[0]).toEqual([hourStart(2), 14]);
  });

  it('a run starts at its creation and counts only its own finishes', () => {
    const created = hourStart(2) + 15 * 60_000;
    const hours = [bucket(2, 9, { r1: 4, other: 5 }), bucket(1, 3, { r1: 3 })];
    const b = runBurnDown({ id: 'r1', createdAt: created, left: 10 }, hours, NOW, { at: null, text: 'x' });
    expect(b.points).toEqual([
      [created, 17],
      [hourStart(1), 13],
      [hourStart(0), 10],
      [NOW, 10],
    ]);
  });

  it('with no records, one point at the start of this hour and one now', () => {
    const b = orgBurnDown([], 0, NOW, eta({}), []);
    expect(b.points).toEqual([
      [hourStart(0), 0],
      [NOW, 0],
    ]);
    expect(b.finishText).toBe('nothing left');
  });
});

describe('the finish as a date', () => {
  it('reads "finishes Mon 14 Dec 2026 09:00 UTC, in 3 d 23 h 30 min"-like text', () => {
    expect(formatDate(Date.UTC(2026, 11, 14, 9, 0))).toBe('Mon 14 Dec 2026 09:00 UTC');
    expect(formatSpan(3 * DAY + 4 * HOUR + 59_000)).toBe('3 d 4 h');
    expect(formatSpan(2 * HOUR + 5 * 60_000)).toBe('2 h 5 min');
    expect(formatSpan(40_000)).toBe('40 s');
    const f = finishOf(finishIn(3 * DAY + 4 * HOUR), 10);
    expect(f.text).toBe('finishes Sun 13 Dec 2026 13:30 UTC, in 3 d 4 h');
    expect(finishOf(eta({ ms: Infinity, text: 'never at these limits' }), 5).text).toBe(
      'no finish: never at these limits',
    );
    expect(finishOf(eta({ ms: 0 }), 5).text).toBe('finishes now: it fits the budget left');
  });

  it("a run finishes by the latest of its organizations' finishes that hold some of it", () => {
    const f = runFinishOf(
      [
        { left: 3, eta: finishIn(HOUR) },
        { left: 0, eta: finishIn(9 * DAY) },
        { left: 1, eta: finishIn(DAY) },
      ],
      NOW,
    );
    expect(f.at).toBe(NOW + DAY);
    expect(f.text).toBe('finishes Fri 11 Dec 2026 09:30 UTC at the latest, in 1 d');
  });
});

/** The numbers of an SVG attribute list like points="1,2 3,4". */
const pairs = (s: string) => s.split(' ').map((p) => p.split(',').map(Number) as [number, number]);

describe('the burn-down SVG', () => {
  const b: BurnDown = {
    points: [
      [NOW - 2 * HOUR, 300],
      [NOW - HOUR, 200],
      [NOW, 100],
    ],
    now: NOW,
    left: 100,
    finishAt: NOW + 2 * HOUR,
    finishText: 'finishes Thu 10 Dec 2026 11:30 UTC, in 2 h',
    partial: false,
  };

  it('draws the points inside the plot, falling, and the dashed projection to a finish marker', () => {
    const svg = burnDownSvg(b, 'acme').value;
    expect(svg).toContain(`viewBox="0 0 ${W} ${H}"`);
    const line = pairs(/class="bd-line" points="([^"]+)"/.exec(svg)?.[1] ?? '');
    expect(line).toHaveLength(3);
    // Time runs left to right over [first point, finish]: now is in the middle of a 4 h span.
    expect(line[0]?.[0]).toBeCloseTo(PLOT.left);
    expect(line[2]?.[0]).toBeCloseTo((PLOT.left + PLOT.right) / 2);
    // The y axis tops at 500 (niceMax of 300): 300 is 60 % up the plot.
    expect(line[0]?.[1]).toBeCloseTo(PLOT.bottom - 0.6 * (PLOT.bottom - PLOT.top), 0);
    const proj = /class="bd-projection"\s+x1="([\d.]+)"\s+y1="([\d.]+)"\s+x2="([\d.]+)"\s+y2="([\d.]+)"/.exec(
      svg,
    );
    expect(proj?.slice(1).map(Number)).toEqual([line[2]?.[0], line[2]?.[1], PLOT.right, PLOT.bottom]);
    expect(svg).toMatch(
      new RegExp(
        `<circle class="bd-finish" cx="${PLOT.right.toFixed(1)}" cy="${PLOT.bottom.toFixed(1)}"[^>]*>\\s*<title>finishes Thu 10 Dec`,
      ),
    );
    expect(svg).toContain(`data-finish-at="${new Date(NOW + 2 * HOUR).toISOString()}"`);
  });

  it('labels the axes with dates and numbers with separators', () => {
    const svg = burnDownSvg(
      {
        ...b,
        points: [
          [NOW - 2 * HOUR, 20_000],
          [NOW, 100],
        ],
      },
      'acme',
    ).value;
    expect(axisDate(NOW)).toEqual(['Thu 10 Dec', '09:30']);
    expect(svg).toContain('>Thu 10 Dec<tspan');
    expect(svg).toContain('>07:30</tspan>'); // the start
    expect(svg).toMatch(/class="bd-x bd-x-finish"[^>]*>Thu 10 Dec<tspan[^>]*>11:30<\/tspan>/);
    expect(svg).toMatch(/>\s*20,000\s*<\/text/);
    expect(svg).toMatch(/>\s*10,000\s*<\/text/);
    expect(niceMax(20_000)).toBe(20_000);
    expect(niceMax(20_001)).toBe(50_000);
  });

  it('has an accessible title and description, with every text escaped', () => {
    const svg = burnDownSvg({ ...b, finishText: 'finishes <soon> & "then"' }, '<script>x</script>').value;
    expect(svg).toContain('role="img"');
    expect(svg).toContain('<title>learners left over time for &lt;script&gt;x&lt;/script&gt;</title>');
    expect(svg).toMatch(
      /<desc>100 learners left now; from Thu 10 Dec 07:30 UTC to now, the line starts at 300\./,
    );
    expect(svg).toContain('finishes &lt;soon&gt; &amp; &quot;then&quot;');
    expect(svg).not.toContain('<script>');
  });

  it('with nothing left and no history: axes, one point, no projection, "nothing left"', () => {
    const empty: BurnDown = {
      points: [[NOW, 0]],
      now: NOW,
      left: 0,
      finishAt: null,
      finishText: 'nothing left',
      partial: false,
    };
    const svg = burnDownSvg(empty, 'acme').value;
    expect(svg).not.toContain('bd-projection');
    expect(svg).not.toContain('bd-finish');
    expect(svg).not.toContain('data-finish-at');
    expect(svg).toMatch(/class="bd-empty"[^>]*>\s*no learner waiting in this span\s*<\/text/);
    // One point over a one-hour span ending now: no NaN anywhere.
    expect(svg).not.toContain('NaN');
    expect(svg).toContain('>08:30</tspan>');
  });

  it('a finish with no date (paused, never) draws no projection', () => {
    const svg = burnDownSvg({ ...b, finishAt: null, finishText: 'no finish: paused' }, 'acme').value;
    expect(svg).not.toContain('bd-projection');
    expect(svg).not.toContain('NaN');
  });
});

describe('limits in words', () => {
  it('names each window by its length and puts separators in numbers', () => {
    expect(perWindow(4000)).toBe('per 4 s');
    expect(perWindow(HOUR)).toBe('per hour');
    expect(perWindow(DAY)).toBe('per day');
    expect(perWindow(30 * 60_000)).toBe('per 30 min');
    expect(perWindow(1500)).toBe('per 1,500 ms');
    expect(humanRate({ max: 20_000, windowMs: DAY })).toBe('20,000 per day');
    expect(humanRateText('100/3600000ms')).toBe('100 per hour');
    expect(num(1234567)).toBe('1,234,567');
  });
});
