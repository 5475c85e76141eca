// The ETA (ops/eta/eta.ts etaOf) with pacing and a run window, from a peek as the limiter reports it: the
// buckets and the closed hours counted, the words operators read ("waiting for the run window (opens
// ...)", what holds the work back). Pure: no Redis, no clock (the peek's now is fixed).
import { describe, expect, it } from 'vitest';
import { etaOf } from '../../src/ops/eta/eta.ts';
import { pacingOf } from '../../src/ops/views/limits.ts';
import { encodeOpen, scheduleOf } from '../../src/limiter/run-window-open.ts';
import type { BudgetView, ScopeView, TokenView } from '../../src/limiter/types.ts';

const H = 3_600_000;
const D = 86_400_000;
/** Thu 2026-12-10 12:00 UTC: inside the school day of Europe/Berlin (13:00 there). */
const NOW = Date.UTC(2026, 11, 10, 12, 0);

function scope(limit: number, windowMs: number, burst?: number): ScopeView {
  return {
    used: 0,
    inflight: 0,
    remaining: limit,
    limit,
    windowMs,
    nextFreeInMs: 0,
    blocked: null,
    paused: null,
    ...(burst
      ? { pace: { burst, available: burst, nextInMs: 0, intervalMs: windowMs / limit, tatInMs: 0 } }
      : {}),
  };
}
const token = (id: string, burst?: number): TokenView => ({
  tokenId: id,
  override: false,
  ...scope(100, H, burst),
});

function view(burst: number | undefined, windows?: string): BudgetView {
  const texts = windows ? { windows, tz: 'Europe/Berlin', blackout: '' } : null;
  const schedule = texts ? scheduleOf(texts) : null;
  return {
    now: NOW,
    org: scope(1000, D, burst ? burst * 10 : undefined),
    tokens: [token('a', burst), token('b', burst)],
    reserve: 0,
    policyStored: true,
    frees: { org: [], tokens: [[], []] },
    ...(texts && schedule ? { runWindow: { ...texts, open: encodeOpen(schedule, NOW) } } : {}),
  };
}

describe('the ETA with pacing and a run window', () => {
  it('pacing alone changes when, not how many: 5,000 learners still take 5 days of 1000', () => {
    const plain = etaOf(view(undefined), 5000);
    const paced = etaOf(view(10), 5000);
    // Paced, the organization's 1000 a day are spread over the day (100 at once, then one every 86.4 s),
    // so the last of 5,000 goes later in its fifth day than unpaced, but still in the fifth day.
    expect(plain.windows).toBe(5);
    expect(paced.windows).toBe(5);
    expect(paced.ms).toBeGreaterThan(plain.ms);
    expect(paced.ms).toBeLessThan(5 * D);
  });

  it('counts the closed hours, and says the window is closed and when it opens', () => {
    const nights = etaOf(view(undefined, 'Mon-Fri 18:00-07:00, Sat-Sun all'), 5000);
    expect(nights.text).toMatch(/^waiting for the run window \(opens Thu 18:00 Europe\/Berlin\); done by /);
    // Closed until 17:00 UTC today: nothing before it.
    expect(nights.ms).toBeGreaterThan(5 * H);
    // Each day's 1000 fit a night (5 h at 200 an hour), so it still takes five of the org's days.
    expect(nights.ms).toBeGreaterThan(etaOf(view(undefined), 5000).ms);
    expect(nights.ms).toBeLessThan(6 * D);
  });

  it('pacing and a 13-hour night: at most 100 + 13 h / 86.4 s = 641 a night (docs/pacing.md), so it takes longer', () => {
    // Weekdays only, so every night has 13 open hours; 10,000 learners.
    const unpaced = etaOf(view(undefined, 'Mon-Fri 18:00-07:00'), 10_000);
    const paced = etaOf(view(10, 'Mon-Fri 18:00-07:00'), 10_000);
    expect(paced.ms).toBeGreaterThan(unpaced.ms);
    // Unpaced: 1000 a weeknight, 10 nights (two weeks). Paced: about 641 a night, 16 nights (over three weeks).
    expect(unpaced.ms).toBeLessThan(14 * D);
    expect(paced.ms).toBeGreaterThan(20 * D);
    expect(paced.ms).toBeLessThan(24 * D);
  });

  it('says when the run window is what holds the work back', () => {
    // A window of one hour a day: the budget would allow far more.
    const e = etaOf(view(undefined, 'all 02:00-03:00'), 3000);
    expect(e.boundBy).toBe('run-window');
    expect(e.limitedBy).toBe('the run window, all 02:00-03:00 (Europe/Berlin)');
  });

  it('says each pace in whole units: 36 s, 1 min 26 s, 2 min, 59 s, 50 ms', () => {
    const every = (limit: number, windowMs: number) =>
      pacingOf(scope(limit, windowMs, 1))?.replace(/^1 at once, then one every /, '');
    expect(every(100, H)).toBe('36 s');
    expect(every(1000, D)).toBe('1 min 26 s');
    expect(every(722, D)).toBe('2 min');
    expect(every(60, 3_576_000)).toBe('1 min');
    expect(every(1000, 59_400 * 1000)).toBe('59 s');
    expect(every(20, 1000)).toBe('50 ms');
    expect(pacingOf(scope(20, 1000))).toBeNull();
  });
});
