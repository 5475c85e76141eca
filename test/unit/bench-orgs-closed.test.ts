// The parts of bench/orgs-closed.ts a wrong figure would come from: the window it writes must be closed
// at the moment it is written (else the bench measures an open fleet) and open again only hours later,
// at any time of day; the idle window's commands must leave out exactly the bench's own readings.
import { describe, expect, it } from 'vitest';
import { scheduleOf } from '../../src/limiter/run-window-open.ts';
import { openIntervals } from '../../src/limiter/run-window.ts';
import { settingsFromEnv, windowClosedSince } from '../../bench/orgs-closed.ts';
import { commandsBetween, parseCommandCounts } from '../../bench/orgs-probes.ts';

const HOUR = 3_600_000;
const MINUTE = 60_000;

describe('bench/orgs-closed window', () => {
  // Every quarter hour of one day, and the minutes around midnight where the window wraps or ends at 24:00.
  const day = Date.UTC(2026, 10, 26);
  const instants = [
    ...Array.from({ length: 96 }, (_, i) => day + i * 15 * MINUTE + 37_000),
    day + HOUR,
    day + 2 * HOUR,
    day + HOUR + 30 * MINUTE,
    day + 2 * HOUR - 1,
  ];

  it.each(instants.map((t) => [new Date(t).toISOString(), t]))(
    'at %s: closed now, closed an hour ago, open again in about 22 h',
    (_, now) => {
      const schedule = scheduleOf({ windows: windowClosedSince(now), tz: 'UTC', blackout: '' });
      if (!schedule) throw new Error('no schedule');
      const open = openIntervals(schedule, now - 3 * HOUR, now + 24 * HOUR);
      expect(open.some(([s, e]) => s <= now && now < e)).toBe(false);
      const last = open.filter(([, e]) => e <= now).at(-1);
      const next = open.find(([s]) => s > now);
      // Minutes are floored: it closed between 60 and 61 minutes ago, after an hour open.
      expect(now - (last?.[1] ?? 0)).toBeGreaterThanOrEqual(HOUR);
      expect(now - (last?.[1] ?? 0)).toBeLessThan(HOUR + MINUTE);
      expect(next?.[0] ?? 0).toBeGreaterThan(now + 22 * HOUR - MINUTE);
      expect(next?.[0] ?? 0).toBeLessThanOrEqual(now + 22 * HOUR);
      expect((next?.[1] ?? 0) - (next?.[0] ?? 0)).toBe(HOUR);
    },
  );
});

describe('bench/orgs-closed commands', () => {
  const info = (total: number, get: number, info: number) =>
    `# Stats\r\ntotal_connections_received:4\r\ntotal_commands_processed:${total}\r\n` +
    `# Commandstats\r\ncmdstat_get:calls=${get},usec=10,usec_per_call=1.00,rejected_calls=0,failed_calls=0\r\n` +
    `cmdstat_info:calls=${info},usec=90,usec_per_call=9.00,rejected_calls=0,failed_calls=0\r\n` +
    `cmdstat_client|list:calls=3,usec=30,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n`;

  it('reads the total and the calls of each command, subcommands included', () => {
    expect(parseCommandCounts(info(120, 7, 5))).toEqual({
      total: 120,
      calls: { get: 7, info: 5, 'client|list': 3 },
    });
  });

  it("counts the commands between two readings, most called first, without the bench's INFO", () => {
    const a = parseCommandCounts(info(120, 7, 5));
    // Between them: 4 GETs, the process's own INFO and the first reading's INFO.
    const b = parseCommandCounts(info(126, 11, 7));
    expect(commandsBetween(a, b, 1)).toEqual({ get: 4, info: 1 });
    expect(Object.keys(commandsBetween(a, b, 1))).toEqual(['get', 'info']);
    expect(commandsBetween(a, a, 0)).toEqual({});
  });
});

describe('bench/orgs-closed settings', () => {
  it('runs both variants at 1 and 1,000 organizations for 30 s unless told', () => {
    expect(settingsFromEnv({})).toEqual({
      sizes: [1, 1000],
      variants: ['closed', 'spent'],
      idleS: 30,
      warmupS: 35,
    });
  });

  it('takes sizes, variants and the windows from the environment, and names a bad variant', () => {
    const s = settingsFromEnv({
      BENCH_ORGS: '5',
      BENCH_ORGS_CLOSED_VARIANTS: 'spent',
      BENCH_ORGS_IDLE_S: '3',
      BENCH_ORGS_WARMUP_S: '0',
    });
    expect(s).toEqual({ sizes: [5], variants: ['spent'], idleS: 3, warmupS: 0 });
    expect(() => settingsFromEnv({ BENCH_ORGS_CLOSED_VARIANTS: 'closed,open' })).toThrow(
      /BENCH_ORGS_CLOSED_VARIANTS: expected some of closed,spent/,
    );
  });
});
