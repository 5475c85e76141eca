// The frees (for the ETA): when each permit counted in a window leaves it, bucketed in steps and rounded
// up, against a real Redis (peek-frees.lua, after a peek). A window with few permits is read whole, one
// with many is counted per step; both must say the same. A plain peek keeps the shape it always had.
import { afterAll, describe, expect, it } from 'vitest';
import { TransferBudget } from '../../src/limiter/index.ts';
import { deletePrefix, newRedis, randomPrefix } from '../helpers/redis.ts';
import { granted } from '../helpers/limiter.ts';

const redis = newRedis();
const prefix = randomPrefix('eta-frees');
const WINDOW = 60_000;
const budget = new TransferBudget(redis, {
  prefix,
  limitPerToken: { max: 100, windowMs: WINDOW },
  limitPerOrg: { max: 1000, windowMs: WINDOW },
  inflightTtlMs: 10_000,
});

afterAll(async () => {
  await deletePrefix(redis, prefix);
  await redis.quit();
});

describe('peek with frees', () => {
  it('says when each counted permit leaves its window, never earlier than it does', async () => {
    // 20 settled (more than the 12 steps: the organization's are counted per step, each token's 10 are
    // read whole), and one still in flight.
    for (let i = 0; i < 20; i++) {
      const p = granted(await budget.acquire('acme', ['t1', 't2']));
      await budget.settle('acme', p.tokenId, p.permitId);
    }
    granted(await budget.acquire('acme', ['t1', 't2']));
    // An entry settled 30 s ago, written as settle would have: it leaves in about 30 s.
    const [sec] = await redis.time();
    await redis.zadd(budget.keys.orgLog('acme'), Number(sec) * 1000 - 30_000, 'old');
    const plain = await budget.peek('acme', ['t1', 't2']);
    expect(plain.frees).toBeUndefined();
    const v = await budget.peekWithFrees('acme', ['t1', 't2'], 12);
    const step = Math.ceil((WINDOW + 1) / 12);
    const org = v.frees?.org ?? [];
    expect(org.reduce((a, [, n]) => a + n, 0)).toBe(v.org.used + v.org.inflight);
    expect(v.org.used + v.org.inflight).toBe(22);
    // The old one in the step that holds 30 s + 1 ms from now, the rest (and the one in flight) at the end.
    expect(org).toContainEqual([6 * step, 1]);
    expect(org.at(-1)).toEqual([WINDOW + 1, 1]);
    expect(org.every(([at]) => at > 0 && at <= WINDOW + 1)).toBe(true);
    const tokens = v.frees?.tokens ?? [];
    expect(tokens.map((t) => t.reduce((a, [, n]) => a + n, 0))).toEqual(
      v.tokens.map((t) => t.used + t.inflight),
    );
    // The batch read status makes, after a peek of many, says the same.
    const [many] = await budget.peekMany([{ org: 'acme', tokenIds: ['t1', 't2'] }]);
    const [alone] = await budget.peekFreesMany(
      [{ org: 'acme', tokenIds: ['t1', 't2'], view: many as typeof v }],
      12,
    );
    expect(alone?.org.reduce((a, [, n]) => a + n, 0)).toBe(22);
    expect(alone).toEqual(v.frees);
  });
});
