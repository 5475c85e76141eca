// Rate limits of the simulator in compressed real time (windows of 1-2 s), and violations(): the check
// other tests rely on to prove "no token ever exceeded its window".
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createSimulator,
  type RequestRecord,
  type Simulator,
  type SimulatorOptions,
} from '../../src/simulator/index.ts';
import { findViolations } from '../../src/simulator/violations.ts';

let sim: Simulator | undefined;
afterEach(async () => {
  await sim?.close();
  sim = undefined;
});

async function start(options: SimulatorOptions): Promise<Simulator> {
  sim = createSimulator({ learners: 500, ...options });
  await sim.listen();
  return sim;
}

async function transfer(id: number, token = 'sim-acme-1') {
  const res = await request(`${sim?.url}/1/learner/${id}/transfer`, {
    method: 'PATCH',
    headers: {
      'user-agent': 'limits-test',
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
    },
    body: '{}',
  });
  const body = (await res.body.json()) as { success: boolean; error?: string; message?: string };
  return { status: res.statusCode, retryAfter: res.headers['retry-after'], body };
}

/** Sleeps until `offset` ms after the next multiple of `windowMs` since the epoch. */
async function untilWindowEdge(windowMs: number, offset: number): Promise<void> {
  const now = Date.now();
  let target = Math.ceil(now / windowMs) * windowMs + offset;
  if (target - now < 20) target += windowMs;
  await sleep(target - now);
}

describe('simulator: rolling limits', () => {
  it('refuses with 429 and Retry-After, without using budget, per token and per organization', async () => {
    await start({
      limits: { window: 'rolling', perToken: { max: 3, windowMs: 2000 }, perOrg: { max: 4, windowMs: 2000 } },
    });
    const t0 = Date.now();
    expect((await transfer(3)).status).toBe(200);
    await sleep(300); // so that only the first leaves the window when we wait for it below
    for (const id of [6, 9]) expect((await transfer(id)).status).toBe(200);
    const refused = await transfer(12);
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ success: false, error: 'Too Many Requests' });
    expect(refused.body.message).toMatch(/3 transfer requests per 2s per API token/);
    expect(refused.retryAfter).toBe('2');
    // The other acme token has room in its own window but the organization has one slot left.
    expect((await transfer(12, 'sim-acme-2')).status).toBe(200);
    const orgRefused = await transfer(15, 'sim-acme-2');
    expect(orgRefused.status).toBe(429);
    expect(orgRefused.body.message).toMatch(/per organization/);
    // Another organization is not affected.
    expect((await transfer(3, 'sim-beta-1')).status).toBe(200);

    // Refusals used no budget: once the first counted request leaves the window, one more fits.
    const first = sim?.record[0]?.countedAt ?? t0;
    await sleep(first + 2000 - Date.now() + 30);
    expect((await transfer(15)).status).toBe(200);
    expect((await transfer(18)).status).toBe(429);

    const limited = sim?.record.filter((r) => r.status === 429) ?? [];
    expect(limited.map((r) => r.result)).toEqual(['rate-limited', 'rate-limited', 'rate-limited']);
    expect(limited.every((r) => r.countedAt === undefined && !r.effectApplied)).toBe(true);
    expect(sim?.ownerChanges(18)).toBe(0);
    expect(sim?.violations()).toEqual([]);
  });

  it('reports no violation for a polite client and the overrun of an impolite one when not enforcing', async () => {
    const rate = { max: 4, windowMs: 400 };
    await start({ limits: { window: 'rolling', perToken: rate } });
    // Polite: one request every 120 ms never puts more than 4 in any 400 ms.
    for (let i = 0; i < 8; i++) {
      const started = Date.now();
      expect((await transfer(3 * i + 3)).status).toBe(200);
      await sleep(Math.max(0, 120 - (Date.now() - started)));
    }
    expect(sim?.violations()).toEqual([]);

    // Impolite, with enforcement off: everything is counted and answered, and violations() sees it.
    sim?.setLimits({ window: 'rolling', perToken: rate, enforce: false });
    await sleep(450);
    const burst = await Promise.all([30, 33, 36, 39, 42, 45].map((id) => transfer(id, 'sim-acme-2')));
    expect(burst.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200]);
    const violations = sim?.violations() ?? [];
    expect(violations).toEqual([
      expect.objectContaining({
        scope: 'token',
        key: 'acme#2',
        count: 6,
        max: 4,
        windowMs: 400,
        window: 'rolling',
      }),
    ]);
    // The same record judged against limits it did keep.
    expect(sim?.violations('rolling', { window: 'rolling', perToken: { max: 6, windowMs: 400 } })).toEqual(
      [],
    );
  });

  it('keeps the budget already spent when the limits change mid-run', async () => {
    await start({});
    for (const id of [3, 6, 9]) expect((await transfer(id)).status).toBe(200);
    sim?.setLimits({ window: 'rolling', perToken: { max: 3, windowMs: 5000 } });
    expect((await transfer(12)).status).toBe(429);
    sim?.setLimits(undefined);
    expect((await transfer(12)).status).toBe(200);
  });
});

describe('simulator: fixed limits', () => {
  it('refuses within an epoch-aligned window and lets 2N through across its edge', async () => {
    const rate = { max: 3, windowMs: 1000 };
    await start({ limits: { window: 'fixed', perToken: rate } });
    await untilWindowEdge(1000, 10);
    for (const id of [3, 6, 9]) expect((await transfer(id)).status).toBe(200);
    const refused = await transfer(12);
    expect(refused.status).toBe(429);
    expect(refused.retryAfter).toBe('1'); // the window ends within the second

    // Three at the end of one window and three at the start of the next: all admitted by a fixed
    // window, a violation of the same limit judged as rolling.
    await untilWindowEdge(1000, -300);
    for (const id of [15, 18, 21]) expect((await transfer(id, 'sim-acme-2')).status).toBe(200);
    await untilWindowEdge(1000, 10);
    for (const id of [24, 27, 30]) expect((await transfer(id, 'sim-acme-2')).status).toBe(200);
    expect(sim?.violations('fixed')).toEqual([]);
    expect(sim?.violations('rolling')).toEqual([
      expect.objectContaining({ scope: 'token', key: 'acme#2', count: 6, max: 3, window: 'rolling' }),
    ]);
  });
});

describe('violations()', () => {
  const rec = (
    seq: number,
    countedAt: number,
    tokenLabel = 'acme#1',
    org = 'acme',
    status = 200,
  ): RequestRecord => ({
    seq,
    method: 'PATCH',
    path: '/1/learner/1/transfer',
    org,
    tokenLabel,
    receivedAt: countedAt,
    countedAt,
    status,
    effectApplied: false,
  });

  /** The fullest count of any window [t, t + w) by brute force. */
  function bruteMax(times: number[], w: number): number {
    let best = 0;
    for (const t of times) best = Math.max(best, times.filter((u) => u >= t && u < t + w).length);
    return best;
  }

  it('agrees with brute force on random logs, for both window kinds', () => {
    let state = 42;
    const rand = () => (state = (state * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let round = 0; round < 200; round++) {
      const times = Array.from({ length: 1 + Math.floor(rand() * 40) }, () => Math.floor(rand() * 3000));
      const record = times.map((t, i) => rec(i + 1, t));
      const max = 1 + Math.floor(rand() * 6);
      const limits = { window: 'rolling' as const, perToken: { max, windowMs: 500 } };
      const rolling = findViolations(record, limits, 'rolling');
      const worst = bruteMax(times, 500);
      expect(rolling.length > 0).toBe(worst > max);
      if (rolling.length > 0) expect(Math.max(...rolling.map((v) => v.count))).toBe(worst);
      const fixedWorst = Math.max(
        ...[0, 1, 2, 3, 4, 5].map((k) => times.filter((t) => Math.floor(t / 500) === k).length),
      );
      const fixed = findViolations(record, limits, 'fixed');
      expect(fixed.length > 0).toBe(fixedWorst > max);
      for (const v of fixed) expect(v.windowStart % 500).toBe(0);
    }
  });

  it('ignores 429s and uncounted requests, and checks every token and organization on 100k records', () => {
    const windowMs = 1000;
    const record: RequestRecord[] = [];
    // 10 tokens in 5 orgs, each token exactly at its limit: 10 per second, evenly spaced, 10k each.
    for (let k = 0; k < 100_000; k++) {
      const token = k % 10;
      const n = Math.floor(k / 10);
      record.push(rec(k + 1, 1_000_000 + n * 100 + token, `o${token % 5}#${token}`, `o${token % 5}`));
    }
    record.push({ ...rec(100_001, 1_000_050, 'o0#0', 'o0', 429) });
    record.push({ ...rec(100_002, 1_000_050, 'o0#0', 'o0'), countedAt: undefined });
    const limits = {
      window: 'rolling' as const,
      perToken: { max: 10, windowMs },
      perOrg: { max: 20, windowMs },
    };
    expect(findViolations(record, limits)).toEqual([]);

    record.push(rec(100_003, 1_500_050, 'o3#3', 'o3'));
    const found = findViolations(record, limits).map((v) => [v.scope, v.key, v.count]);
    expect(found).toHaveLength(2);
    expect(found).toEqual(
      expect.arrayContaining([
        ['token', 'o3#3', 11],
        ['org', 'o3', 21],
      ]),
    );
  });
});
