// The ETA's simulation of the limiter (limiter/simulate/) and its wording (ops/eta/eta.ts), on the issue's
// examples with finishes worked out by hand. Pure: no Redis, no clock.
import { describe, expect, it } from 'vitest';
import { etaOf, formatUtc } from '../../src/ops/eta/eta.ts';
import { simulate, type SimScope } from '../../src/limiter/simulate/index.ts';
import type { BudgetView, ScopeView, TokenView } from '../../src/limiter/types.ts';
import type { FreeStep } from '../../src/limiter/budget-schedule.ts';

const S = 1000;
const H = 3_600_000;
const D = 86_400_000;
/** 2026-12-10 09:00 UTC. */
const NOW = Date.UTC(2026, 11, 10, 9, 0);

const fresh = (limit: number, windowMs: number, more: Partial<SimScope> = {}): SimScope => ({
  limit,
  windowMs,
  frees: [],
  blockedMs: 0,
  ...more,
});

function scope(limit: number, windowMs: number, more: Partial<ScopeView> = {}): ScopeView {
  return {
    used: 0,
    inflight: 0,
    remaining: limit,
    limit,
    windowMs,
    nextFreeInMs: 0,
    blocked: null,
    paused: null,
    ...more,
  };
}

const token = (id: string, limit: number, windowMs: number, more: Partial<ScopeView> = {}): TokenView => ({
  tokenId: id,
  override: false,
  ...scope(limit, windowMs, more),
});

function view(
  org: ScopeView,
  tokens: TokenView[],
  more: Partial<BudgetView> & { orgFrees?: FreeStep[]; tokenFrees?: FreeStep[][] } = {},
): BudgetView {
  const { orgFrees, tokenFrees, ...rest } = more;
  return {
    now: NOW,
    org,
    tokens,
    reserve: 0,
    policyStored: true,
    frees: { org: orgFrees ?? [], tokens: tokens.map((_, i) => tokenFrees?.[i] ?? []) },
    ...rest,
  };
}

/** The day: two tokens at 100/1h, the organization at 1000/1d, nothing spent. */
const freshDay = () => view(scope(1000, D), [token('a', 100, H), token('b', 100, H)]);

describe('simulate', () => {
  it('5,000 learners, 2 x 100/1h, 1000/1d, a fresh day: 4 days 4 hours (the old ETA said 6 days)', () => {
    // 200 an hour for 5 hours fills the day; a permit leaves its window at grant + window + 1 ms, so
    // batch j of day k goes at k (1 d + 1 ms) + j (1 h + 1 ms): the 25th batch is k = 4, j = 4.
    const r = simulate({ remaining: 5000, org: fresh(1000, D), tokens: [fresh(100, H), fresh(100, H)] });
    expect(r.finishMs).toBe(4 * D + 4 * H + 8);
    expect(r.boundBy).toBe('org');
    // The days after the first repeat the first's shape: they are skipped, not simulated.
    expect(r.steps).toBeLessThan(20);
  });

  it('a million learners cost a few steps and land where the formula says', () => {
    const r = simulate({ remaining: 1_000_000, org: fresh(1000, D), tokens: [fresh(100, H), fresh(100, H)] });
    // 5,000 batches of 200: the last is day 999, hour 4.
    expect(r.finishMs).toBe(999 * (D + 1) + 4 * (H + 1));
    expect(r.steps).toBeLessThan(20);
  });

  it('compressed: 5,000 learners at 2 x 50/1s and 500/5s span the floor of 10 windows (the old ETA said 11)', () => {
    const r = simulate({
      remaining: 5000,
      org: fresh(500, 5 * S),
      tokens: [fresh(50, S), fresh(50, S)],
    });
    // The tokens refill one second + 1 ms after each batch of 100; the organization's window always has
    // room by then (it frees 100 at batch + 5,001 ms): 50 batches, the last at 49 x 1,001 ms.
    expect(r.finishMs).toBe(49 * 1001);
    expect(1 + Math.floor(r.finishMs / (5 * S))).toBe(10);
    expect(r.boundBy).toBe('token');
  });

  it('skips whole periods of a token-bound schedule too, and from a fragmented start', () => {
    const r = simulate({
      remaining: 1_000_000,
      org: fresh(500, 5 * S),
      tokens: [fresh(50, S), fresh(50, S)],
    });
    // 10,000 batches of 100, one every 1,001 ms.
    expect(r.finishMs).toBe(9999 * 1001);
    expect(r.steps).toBeLessThan(30);
    // 200 of the day's permits leaving over the day, 60 of each token's over the hour (as peek reports
    // them, in steps): the finish is the day's pattern repeated, found after a few days, not 20 of them.
    const day = (n: number, w: number, steps: number) =>
      Array.from({ length: steps }, (_, i) => [Math.ceil((w + 1) / steps) * (i + 1), n / steps] as const);
    const busy = {
      org: fresh(1000, D, { frees: day(240, D, 12) }),
      tokens: [fresh(100, H, { frees: day(60, H, 12) }), fresh(100, H, { frees: day(60, H, 12) })],
    };
    const twenty = simulate({ remaining: 20_000, ...busy });
    const forty = simulate({ remaining: 40_000, ...busy });
    expect(forty.finishMs - twenty.finishMs).toBe(20 * (D + 1));
    expect(forty.steps).toBeLessThan(200);
  });

  it('goes on at the average pace when no period shows within its bound of batches', () => {
    // Windows of 1,000 and 1,001 ms drift against each other: the schedule has no short period.
    const r = simulate({
      remaining: 1_000_000,
      org: fresh(1_000_000, D),
      tokens: [fresh(10, S), fresh(10, S + 1)],
    });
    expect(r.steps).toBe(20_000);
    // About 10 per 1,001 ms and 10 per 1,002 ms.
    const pace = 10 / 1001 + 10 / 1002;
    expect(Math.abs(r.finishMs - 1_000_000 / pace) / (1_000_000 / pace)).toBeLessThan(0.01);
  });

  it('a token-bound pace: 250 learners at one token of 100/1h and an organization of 1000/1m', () => {
    const r = simulate({ remaining: 250, org: fresh(1000, 60 * S), tokens: [fresh(100, H)] });
    expect(r.finishMs).toBe(2 * (H + 1));
    expect(r.boundBy).toBe('token');
  });

  it('starts from the permits in the windows now and when they leave', () => {
    // 600 of today's 1000 are spent and leave in 3 hours: 400 now, 600 then.
    const r = simulate({
      remaining: 1000,
      org: fresh(1000, D, { frees: [[3 * H, 600]] }),
      tokens: [fresh(10_000, H)],
    });
    expect(r.finishMs).toBe(3 * H);
    // Permits in flight count as used now: they leave one window (+ 1 ms) after their settle.
    const inflight = simulate({
      remaining: 10,
      org: fresh(10, S, { frees: [[S + 1, 10]] }),
      tokens: [fresh(10, S, { frees: [[S + 1, 10]] })],
    });
    expect(inflight.finishMs).toBe(S + 1);
  });

  it('waits out a 429 block, never uses a token refused with 401, and says never without a token', () => {
    const r = simulate({
      remaining: 150,
      org: fresh(1000, D),
      tokens: [fresh(100, H, { blockedMs: 30 * S }), fresh(100, H, { blockedMs: Infinity })],
    });
    expect(r.finishMs).toBe(30 * S + H + 1);
    expect(r.boundBy).toBe('token');
    const none = simulate({
      remaining: 1,
      org: fresh(10, S),
      tokens: [fresh(10, S, { blockedMs: Infinity })],
    });
    expect(none.finishMs).toBe(Infinity);
    expect(simulate({ remaining: 0, org: fresh(10, S), tokens: [] }).boundBy).toBe('none');
  });

  it('spreads a batch over tokens the way acquire does (the one with the most room first)', () => {
    // The organization lets 15 go per second; token a refills every second, b every 10 s. Acquire gives
    // each permit to the token with the most room: 7 on a and 8 on b at t = 0, so at 1,001 ms a has 10
    // and b 2: 12 go, and the last 3 wait for the next second. (Filling a first would finish at 1,001.)
    const r = simulate({ remaining: 30, org: fresh(15, S), tokens: [fresh(10, S), fresh(10, 10 * S)] });
    expect(r.finishMs).toBe(2 * 1001);
  });
});

describe('etaOf', () => {
  it('gives the finish as a UTC date and time, and the budget that holds it back by its real window', () => {
    const eta = etaOf(freshDay(), 5000);
    expect(eta.finishAt).toBe(NOW + 4 * D + 4 * H + 8);
    expect(eta.finishUtc).toBe('2026-12-14 13:00 UTC');
    expect(eta.boundBy).toBe('org');
    expect(eta.limitedBy).toBe("the organization's budget, 1000/1d");
    expect(eta.windows).toBe(5);
    expect(eta.text).toBe(
      "done by 2026-12-14 13:00 UTC, in 4 days 4 h (5 windows of 1d); limited by the organization's budget, 1000/1d",
    );
    expect(eta.availableNow).toBe(200);
  });

  it('20,000 learners: 20 windows (plan said 21 and status 20 before)', () => {
    const eta = etaOf(freshDay(), 20_000);
    expect(eta.windows).toBe(20);
    expect(eta.ms).toBe(19 * (D + 1) + 4 * (H + 1));
  });

  it('names the tokens when they hold the work back, and a what-if with more of them', () => {
    const v = view(scope(1000, 60 * S), [token('a', 100, H)]);
    const eta = etaOf(v, 250);
    expect(eta.limitedBy).toBe("the token's budget, 100/1h");
    expect(eta.finishUtc).toBe(formatUtc(NOW + 2 * H + 2));
    const two = etaOf(freshDay(), 5000, { tokens: 1 });
    // One token: 10 batches of 100 a day, hours 0 to 9.
    expect(two.ms).toBe(4 * (D + 1) + 9 * (H + 1));
    const four = etaOf(freshDay(), 5000, { tokens: 4 });
    expect(four.tokens).toBe(4);
    // 400 an hour: two full hours and 200 in the third fill the day.
    expect(four.ms).toBe(4 * (D + 1) + 2 * (H + 1));
    const both = view(scope(1000, 60 * S), [token('a', 100, H), token('b', 50, H)]);
    expect(etaOf(both, 1000).limitedBy).toBe("the tokens' budgets, 100/1h and 50/1h");
    expect(etaOf(view(scope(1000, D), [token('a', 10, S), token('b', 10, S)]), 1000).limitedBy).toBe(
      "the tokens' budgets, 10/1s each",
    );
  });

  it('applies the reserve and a learned limit, and says so', () => {
    const v = view(scope(600, D), [token('a', 1000, H), token('b', 1000, H)], { reserve: 400 });
    const eta = etaOf(v, 1800);
    expect(eta.ms).toBe(2 * (D + 1));
    expect(eta.limitedBy).toBe("the organization's budget, 600/1d (after a reserve of 400)");
    const learned = view(
      scope(500, D, { learned: { max: 500, at: NOW - H, configured: 1000, nextProbeInMs: H } }),
      [token('a', 1000, H)],
    );
    expect(etaOf(learned, 1000).limitedBy).toBe("the organization's budget, 500/1d (learned from 429s)");
    const all = view(scope(0, D), [token('a', 100, H)], { reserve: 1000 });
    expect(etaOf(all, 1).text).toBe('never at these limits: the reserve leaves this tool nothing');
  });

  it('says "paused" and gives no finish for a paused organization', () => {
    const v = view(
      scope(1000, D, { paused: { who: 'cli:x@y', at: '2026-12-10T09:00:00Z' } }),
      freshDay().tokens,
    );
    const eta = etaOf(v, 5000);
    expect(eta.paused).toBe(true);
    expect(eta.finishAt).toBeNull();
    expect(eta.text).toBe('paused: no finish until it is resumed (then 4 days 4 h at these limits)');
    expect(eta.availableNow).toBe(0);
  });

  it('counts blocked and refused tokens, in-flight permits, and a peek without frees', () => {
    const v = view(scope(1000, D), [
      token('a', 100, H, { blocked: { reason: '429', remainingMs: 30 * S } }),
      token('b', 100, H, { blocked: { reason: '401', remainingMs: null } }),
    ]);
    const eta = etaOf(v, 150);
    expect(eta.ms).toBe(30 * S + H + 1);
    expect(eta.tokens).toBe(1);
    expect(eta.finishUtc).toBe('2026-12-10 10:01 UTC');
    const refused = view(scope(1000, D), [
      token('b', 100, H, { blocked: { reason: '401', remainingMs: null } }),
    ]);
    expect(etaOf(refused, 1).text).toMatch(/^never: no usable token/);
    // What holds it back is the tokens, in status --json and the overview too.
    expect(etaOf(refused, 1).boundBy).toBe('token');
    // 10 in flight in a 10/1s window, no frees read: they leave a window after now.
    const { frees: _none, ...busy } = view(scope(10, S, { inflight: 10, remaining: 0 }), [
      token('a', 100, S),
    ]);
    expect(etaOf(busy, 10).ms).toBe(S + 1);
    expect(etaOf(freshDay(), 0).text).toBe('nothing left');
    expect(etaOf(freshDay(), 150).text).toBe('done now, within the budget left (200 left)');
  });
});
