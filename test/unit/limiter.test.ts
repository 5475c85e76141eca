// The transfer budget against a real Redis, in compressed real time (windows of a few hundred ms).
// Waits are checked exactly against the scores in Redis, never against the test's own clock.
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { tokenFingerprint } from '../../src/core/config.ts';
import type { Rate } from '../../src/core/duration.ts';
import { TransferBudget, type Acquired, type BudgetEvent } from '../../src/limiter/index.ts';
import { deletePrefix, dumpPrefix, newRedis, randomPrefix } from '../helpers/redis.ts';
import { granted, refused } from '../helpers/limiter.ts';

const redis = newRedis();
const prefix = randomPrefix('limiter');
let orgs = 0;
/** Each test works on its own organization, so tests never share a window. */
const newOrg = () => `org${++orgs}`;

afterAll(async () => {
  await deletePrefix(redis, prefix);
  await redis.quit();
});

function budget(limitPerToken: Rate, limitPerOrg: Rate, inflightTtlMs = 10_000): TransferBudget {
  return new TransferBudget(redis, { prefix, limitPerToken, limitPerOrg, inflightTtlMs });
}

/**
 * Sleeps a refusal's wait. Node timers may fire a millisecond early (libuv's cached loop time), so a
 * few ms are added; a worker that wakes early is merely refused again with a wait of 1-2 ms.
 */
const wake = (waitMs: number) => sleep(waitMs + 3);

/**
 * The budget frees at `freeAt` (Redis ms): a call before is refused with exactly the wait to it, a call
 * from then on is granted. Holds whatever the test's own timing (a stalled test may call late).
 */
async function expectFreesAt(b: TransferBudget, org: string, freeAt: number): Promise<Acquired> {
  const r = await b.acquire(org, ['t1']);
  if (r.ok) {
    expect(r.now).toBeGreaterThanOrEqual(freeAt);
    return r;
  }
  expect(r.now).toBeLessThan(freeAt);
  expect(r.now + r.waitMs).toBe(freeAt);
  await wake(r.waitMs);
  const p = granted(await b.acquire(org, ['t1']));
  expect(p.now).toBeGreaterThanOrEqual(freeAt);
  return p;
}

async function redisNow(): Promise<number> {
  const [seconds, micros] = await redis.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

async function scores(key: string): Promise<Map<string, number>> {
  const flat = await redis.zrange(key, 0, -1, 'WITHSCORES');
  const out = new Map<string, number>();
  for (let i = 0; i < flat.length; i += 2) out.set(flat[i] ?? '', Number(flat[i + 1]));
  return out;
}

/** Every key of one organization with its members and scores (or string value), TTLs aside. */
async function snapshot(org: string): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  const keys = (await redis.keys(`${prefix}:{${org}}:*`)).sort();
  for (const key of keys) {
    out[key] =
      (await redis.type(key)) === 'zset'
        ? await redis.zrange(key, 0, -1, 'WITHSCORES')
        : await redis.get(key);
  }
  return out;
}

describe('TransferBudget.acquire', () => {
  it('grants exactly N in a window, refuses the next with the exact wait, and grants when it frees', async () => {
    const b = budget({ max: 5, windowMs: 600 }, { max: 100, windowMs: 600 });
    const org = newOrg();
    for (let i = 0; i < 5; i++) {
      const p = granted(await b.acquire(org, ['t1']));
      await b.settle(org, 't1', p.permitId);
    }
    const r = refused(await b.acquire(org, ['t1']));
    expect(r.scope).toBe('token');
    expect(r.allBlockedIndefinitely).toBe(false);
    const oldest = Math.min(...(await scores(b.keys.tokenLog(org, 't1'))).values());
    // Counted while score >= now - window: the oldest frees at score + window + 1.
    expect(r.waitMs).toBe(oldest + 600 + 1 - r.now);

    // How soon after that the test's own timer fires is Node's, not the limiter's (bench/ measures it):
    // expectFreesAt checks the limiter at whatever time the call lands.
    await sleep(Math.max(0, r.waitMs - 100));
    await expectFreesAt(b, org, oldest + 601);
  });

  it('grants exactly N of many concurrent acquires', async () => {
    const b = budget({ max: 7, windowMs: 5000 }, { max: 100, windowMs: 5000 });
    const org = newOrg();
    const results = await Promise.all(Array.from({ length: 50 }, () => b.acquire(org, ['t1'])));
    expect(results.filter((r) => r.ok)).toHaveLength(7);
    const ids = new Set(results.flatMap((r) => (r.ok ? [r.permitId] : [])));
    expect(ids.size).toBe(7);
  });

  it('writes nothing when the org refuses (token keys unchanged)', async () => {
    const b = budget({ max: 10, windowMs: 1000 }, { max: 3, windowMs: 1000 });
    const org = newOrg();
    const first = granted(await b.acquire(org, ['t1', 't2']));
    await b.settle(org, first.tokenId, first.permitId);
    granted(await b.acquire(org, ['t1', 't2']));
    granted(await b.acquire(org, ['t1', 't2']));
    const before = await snapshot(org);
    const r = refused(await b.acquire(org, ['t1', 't2']));
    expect(r.scope).toBe('org');
    expect(await snapshot(org)).toEqual(before);
  });

  it('writes nothing when the token refuses (org keys unchanged)', async () => {
    const b = budget({ max: 2, windowMs: 1000 }, { max: 10, windowMs: 1000 });
    const org = newOrg();
    const first = granted(await b.acquire(org, ['t1']));
    await b.settle(org, 't1', first.permitId);
    granted(await b.acquire(org, ['t1']));
    const before = await snapshot(org);
    const r = refused(await b.acquire(org, ['t1']));
    expect(r.scope).toBe('token');
    expect(await snapshot(org)).toEqual(before);
  });

  it('spreads a pool over its tokens and stops at the org limit', async () => {
    const b = budget({ max: 3, windowMs: 1000 }, { max: 5, windowMs: 1000 });
    const org = newOrg();
    const used: string[] = [];
    for (let i = 0; i < 5; i++) used.push(granted(await b.acquire(org, ['t1', 't2'])).tokenId);
    // The token with the most room goes first; the pool's order breaks ties.
    expect(used).toEqual(['t1', 't2', 't1', 't2', 't1']);
    const r = refused(await b.acquire(org, ['t1', 't2']));
    expect(r.scope).toBe('org');
    expect(r.waitMs).toBe(1001); // all in flight: no earlier than one window after a settle
  });

  it('takes the longest of the org wait and the shortest token wait', async () => {
    const b = budget({ max: 1, windowMs: 400 }, { max: 2, windowMs: 900 });
    const org = newOrg();
    for (const _ of [1, 2]) {
      const p = granted(await b.acquire(org, ['t1', 't2']));
      await b.settle(org, p.tokenId, p.permitId);
      await sleep(20);
    }
    const s1 = [...(await scores(b.keys.tokenLog(org, 't1'))).values()][0] ?? NaN;
    const r = refused(await b.acquire(org, ['t1', 't2']));
    expect(r.scope).toBe('org');
    expect(r.waitMs).toBe(s1 + 901 - r.now);

    // Another org with room: the earliest token decides.
    const roomy = budget({ max: 1, windowMs: 400 }, { max: 10, windowMs: 900 });
    const org2 = newOrg();
    for (const _ of [1, 2]) {
      const p = granted(await roomy.acquire(org2, ['t1', 't2']));
      await roomy.settle(org2, p.tokenId, p.permitId);
      await sleep(20);
    }
    const t1 = [...(await scores(roomy.keys.tokenLog(org2, 't1'))).values()][0] ?? NaN;
    const r2 = refused(await roomy.acquire(org2, ['t1', 't2']));
    expect(r2.scope).toBe('token');
    expect(r2.waitMs).toBe(t1 + 401 - r2.now);
  });

  it('says so when the pool is empty, and rejects bad keys without echoing token ids', async () => {
    const b = budget({ max: 1, windowMs: 1000 }, { max: 1, windowMs: 1000 });
    const r = refused(await b.acquire(newOrg(), []));
    expect(r).toMatchObject({ scope: 'no-token', allBlockedIndefinitely: true, waitMs: 1000 });
    await expect(b.acquire('bad}org', ['t1'])).rejects.toMatchObject({ code: 'LT_INPUT_INVALID' });
    const err: unknown = await b.acquire('acme', ['Bearer secret value']).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'LT_INPUT_INVALID' });
    expect((err as Error).message).not.toContain('secret');
  });
});

describe('TransferBudget in flight, settle, abandon and release', () => {
  it('counts a permit in flight until it settles, then for one window from the settle', async () => {
    const b = budget({ max: 2, windowMs: 400 }, { max: 100, windowMs: 400 });
    const org = newOrg();
    const a = granted(await b.acquire(org, ['t1']));
    granted(await b.acquire(org, ['t1']));
    expect(refused(await b.acquire(org, ['t1'])).waitMs).toBe(401);
    await sleep(450); // a window later, still in flight: still counted
    expect(refused(await b.acquire(org, ['t1'])).waitMs).toBe(401);
    await b.settle(org, 't1', a.permitId);
    const stamp = (await scores(b.keys.tokenLog(org, 't1'))).get(a.permitId) ?? NaN;
    expect(await redis.zscore(b.keys.orgLog(org), a.permitId)).toBe(String(stamp));
    expect(await redis.zcard(b.keys.tokenInflight(org, 't1'))).toBe(1);
    const r = refused(await b.acquire(org, ['t1']));
    expect(r.waitMs).toBe(stamp + 401 - r.now);
    await wake(r.waitMs);
    granted(await b.acquire(org, ['t1']));
  });

  it('stamps at settle time: acquired at t0, settled at t0+300, frees at t0+300+window', async () => {
    const b = budget({ max: 1, windowMs: 500 }, { max: 100, windowMs: 500 });
    const org = newOrg();
    const a = granted(await b.acquire(org, ['t1']));
    await sleep(300);
    await b.settle(org, 't1', a.permitId);
    const stamp = (await scores(b.keys.tokenLog(org, 't1'))).get(a.permitId) ?? NaN;
    expect(stamp).toBeGreaterThanOrEqual(a.now + 300);
    // Past the time an acquire-time stamp would have freed it: still refused until stamp + window.
    await sleep(a.now + 501 + 20 - (await redisNow()));
    await expectFreesAt(b, org, stamp + 501);
  });

  it("moves a dead holder's permit to the log at its deadline: not leaked, not freed early", async () => {
    const b = budget({ max: 1, windowMs: 600 }, { max: 100, windowMs: 600 }, 300);
    const org = newOrg();
    const a = granted(await b.acquire(org, ['t1']));
    const deadline = a.now + 300;
    expect(await redis.zscore(b.keys.tokenInflight(org, 't1'), a.permitId)).toBe(String(deadline));
    expect(refused(await b.acquire(org, ['t1'])).waitMs).toBe(601);
    await sleep(350);
    const r = refused(await b.acquire(org, ['t1']));
    expect(await redis.zscore(b.keys.tokenLog(org, 't1'), a.permitId)).toBe(String(deadline));
    expect(await redis.zscore(b.keys.orgLog(org), a.permitId)).toBe(String(deadline));
    expect(await redis.exists(b.keys.tokenInflight(org, 't1'), b.keys.orgInflight(org))).toBe(0);
    expect(r.waitMs).toBe(deadline + 601 - r.now);
    await sleep(r.waitMs - 100);
    await expectFreesAt(b, org, deadline + 601);
  });

  it('abandon keeps the permit counted until its in-flight deadline, then a window', async () => {
    const b = budget({ max: 1, windowMs: 400 }, { max: 100, windowMs: 400 }, 500);
    const org = newOrg();
    const a = granted(await b.acquire(org, ['t1']));
    await b.abandon(org, 't1', a.permitId);
    expect(await redis.zscore(b.keys.tokenLog(org, 't1'), a.permitId)).toBe(String(a.now + 500));
    expect(await redis.zscore(b.keys.orgLog(org), a.permitId)).toBe(String(a.now + 500));
    expect(await redis.zcard(b.keys.orgInflight(org))).toBe(0);
    const r = refused(await b.acquire(org, ['t1']));
    expect(r.now + r.waitMs).toBe(a.now + 500 + 401);
  });

  it('a response after the deadline raises the stamp to the settle time', async () => {
    const b = budget({ max: 1, windowMs: 500 }, { max: 100, windowMs: 500 }, 150);
    const org = newOrg();
    const a = granted(await b.acquire(org, ['t1']));
    await sleep(200);
    refused(await b.acquire(org, ['t1'])); // moves it to the log at a.now + 150
    expect(await redis.zscore(b.keys.tokenLog(org, 't1'), a.permitId)).toBe(String(a.now + 150));
    await b.settle(org, 't1', a.permitId);
    const stamp = Number(await redis.zscore(b.keys.tokenLog(org, 't1'), a.permitId));
    expect(stamp).toBeGreaterThanOrEqual(a.now + 200);
    // Settling twice changes nothing but the stamp, which only grows.
    await b.settle(org, 't1', a.permitId);
    expect(await redis.zcard(b.keys.tokenLog(org, 't1'))).toBe(1);
  });

  it('release returns the budget at once and announces it; a permit past its deadline stays counted', async () => {
    const b = budget({ max: 1, windowMs: 5000 }, { max: 100, windowMs: 5000 }, 200);
    const org = newOrg();
    const sub = newRedis();
    const events: BudgetEvent[] = [];
    await sub.subscribe(b.keys.limiterEvents(org));
    sub.on('message', (_channel: string, message: string) => events.push(JSON.parse(message) as BudgetEvent));
    try {
      const a = granted(await b.acquire(org, ['t1']));
      await b.release(org, 't1', a.permitId);
      const again = granted(await b.acquire(org, ['t1']));
      await sleep(250);
      refused(await b.acquire(org, ['t1'])); // past its deadline: moved to the log
      await b.release(org, 't1', again.permitId);
      expect(refused(await b.acquire(org, ['t1'])).scope).toBe('token');
      await sleep(50);
      expect(events).toEqual([{ event: 'release', org, tokenId: 't1' }]);
    } finally {
      await sub.quit();
    }
  });
});

/**
 * Blocks for `ms` and returns the Redis times just before and after: the block ends between from + ms and
 * to + ms, whatever the test's own timing, so a refusal's end (now + waitMs) is checked against those.
 */
async function blockFor(b: TransferBudget, org: string, tokenId: string | null, ms: number) {
  const from = await redisNow();
  await b.block(org, tokenId, ms, '429');
  const to = await redisNow();
  // Redis TIME and PTTL are each floored to whole ms, so a wait read back may end 1 ms before the block
  // set at `from` would by the clock: the block's own window, less that rounding.
  return { from: from + ms - 1, to: to + ms };
}

describe('TransferBudget blocks', () => {
  it('skips a token blocked by a 429 until its Retry-After', async () => {
    const b = budget({ max: 5, windowMs: 1000 }, { max: 100, windowMs: 1000 });
    const org = newOrg();
    const ends = await blockFor(b, org, 't1', 300);
    for (let i = 0; i < 3; i++) expect(granted(await b.acquire(org, ['t1', 't2'])).tokenId).toBe('t2');
    const r = refused(await b.acquire(org, ['t1']));
    expect(r.scope).toBe('blocked-token');
    expect(r.allBlockedIndefinitely).toBe(false);
    expect(r.now + r.waitMs).toBeGreaterThanOrEqual(ends.from);
    expect(r.now + r.waitMs).toBeLessThanOrEqual(ends.to);
    await wake(r.waitMs);
    expect(granted(await b.acquire(org, ['t1'])).tokenId).toBe('t1');
  });

  it('waits for the later of a block and a full window', async () => {
    const b = budget({ max: 1, windowMs: 800 }, { max: 100, windowMs: 800 });
    const org = newOrg();
    const a = granted(await b.acquire(org, ['t1']));
    await b.settle(org, 't1', a.permitId);
    const stamp = (await scores(b.keys.tokenLog(org, 't1'))).get(a.permitId) ?? NaN;
    await b.block(org, 't1', 200, '429');
    const r = refused(await b.acquire(org, ['t1']));
    expect(r.scope).toBe('token');
    // The window's end, not the block's (the settle's stamp + window + 1, from Redis's own scores).
    expect(r.now + r.waitMs).toBe(stamp + 801);
  });

  it('blocks a token for a 401 until unblock, and a later 429 does not shorten it', async () => {
    const b = budget({ max: 5, windowMs: 1000 }, { max: 100, windowMs: 1000 });
    const org = newOrg();
    await b.block(org, 't1', 'indefinite', '401');
    await b.block(org, 't1', 200, '429');
    const r = refused(await b.acquire(org, ['t1']));
    expect(r).toMatchObject({ scope: 'blocked-token', allBlockedIndefinitely: true, waitMs: 1000 });
    expect(granted(await b.acquire(org, ['t1', 't2'])).tokenId).toBe('t2');
    expect((await b.peek(org, ['t1'])).tokens[0]?.blocked).toEqual({ reason: '401', remainingMs: null });
    await b.unblock(org, 't1');
    expect(granted(await b.acquire(org, ['t1'])).tokenId).toBe('t1');
  });

  it('keeps the longer of two 429 blocks', async () => {
    const b = budget({ max: 5, windowMs: 1000 }, { max: 100, windowMs: 1000 });
    const org = newOrg();
    const ends = await blockFor(b, org, 't1', 5000);
    await b.block(org, 't1', 100, '429');
    const r = refused(await b.acquire(org, ['t1']));
    expect(r.now + r.waitMs).toBeGreaterThanOrEqual(ends.from);
    expect(r.now + r.waitMs).toBeLessThanOrEqual(ends.to);
  });

  it('blocks every token when the org is blocked', async () => {
    const b = budget({ max: 5, windowMs: 1000 }, { max: 100, windowMs: 1000 });
    const org = newOrg();
    const ends = await blockFor(b, org, null, 5000);
    const r = refused(await b.acquire(org, ['t1', 't2']));
    expect(r.scope).toBe('blocked-org');
    expect(r.allBlockedIndefinitely).toBe(false);
    expect(r.now + r.waitMs).toBeGreaterThanOrEqual(ends.from);
    expect(r.now + r.waitMs).toBeLessThanOrEqual(ends.to);
    await b.block(org, null, 'indefinite', '401');
    expect(refused(await b.acquire(org, ['t1', 't2']))).toMatchObject({
      scope: 'blocked-org',
      allBlockedIndefinitely: true,
    });
    await b.unblock(org, null);
    granted(await b.acquire(org, ['t1', 't2']));
  });
});

describe('TransferBudget.peek', () => {
  it('reports used, in flight, remaining, next free and blocks without writing', async () => {
    const b = budget({ max: 3, windowMs: 2000 }, { max: 4, windowMs: 2000 }, 300);
    const org = newOrg();
    const a = granted(await b.acquire(org, ['t1', 't2']));
    granted(await b.acquire(org, ['t1', 't2']));
    granted(await b.acquire(org, ['t1', 't2']));
    await b.settle(org, a.tokenId, a.permitId);
    await b.block(org, 't2', 5000, '429');
    const v = await b.peek(org, ['t1', 't2']);
    expect(v.org).toMatchObject({
      used: 1,
      inflight: 2,
      remaining: 1,
      limit: 4,
      windowMs: 2000,
      nextFreeInMs: 0,
    });
    expect(v.org.blocked).toBeNull();
    expect(v.tokens[0]).toMatchObject({ tokenId: 't1', used: 1, inflight: 1, remaining: 1, nextFreeInMs: 0 });
    expect(v.tokens[1]).toMatchObject({ tokenId: 't2', used: 0, inflight: 1, remaining: 2 });
    expect(v.tokens[1]?.blocked?.reason).toBe('429');
    expect(v.tokens[1]?.blocked?.remainingMs).toBeGreaterThan(4900);

    granted(await b.acquire(org, ['t1']));
    await sleep(350); // the three unsettled permits pass their deadline; nobody acquires
    const before = await snapshot(org);
    const full = await b.peek(org, ['t1', 't2']);
    expect(await snapshot(org)).toEqual(before); // expired entries seen, not moved
    expect(full.org).toMatchObject({ used: 4, inflight: 0, remaining: 0 });
    const stamp = Number(await redis.zscore(b.keys.orgLog(org), a.permitId));
    expect(full.org.nextFreeInMs).toBe(stamp + 2001 - full.now);
    // What acquire computes from the same state.
    const r = refused(await b.acquire(org, ['t1']));
    expect(r.now + r.waitMs).toBe(full.now + full.org.nextFreeInMs);
  });

  it('shows an empty budget for an org never seen', async () => {
    const b = budget({ max: 3, windowMs: 2000 }, { max: 4, windowMs: 2000 });
    const v = await b.peek(newOrg(), ['t1']);
    expect(v.org).toEqual({
      used: 0,
      inflight: 0,
      remaining: 4,
      limit: 4,
      windowMs: 2000,
      nextFreeInMs: 0,
      blocked: null,
      paused: null,
    });
    expect(v.tokens).toEqual([
      {
        tokenId: 't1',
        used: 0,
        inflight: 0,
        remaining: 3,
        limit: 3,
        windowMs: 2000,
        nextFreeInMs: 0,
        blocked: null,
        paused: null,
        override: false,
      },
    ]);
    // No policy stored: the fallback limits, no reserve.
    expect(v.policyStored).toBe(false);
    expect(v.reserve).toBe(0);
  });
});

describe('TransferBudget keys', () => {
  it('keeps every key under the prefix and the {org} hash tag, expiring, with no token secret', async () => {
    const secrets = ['s3cr3t-alpha-0123456789', 's3cr3t-beta-9876543210'];
    const ids = secrets.map(tokenFingerprint);
    const b = budget({ max: 5, windowMs: 1000 }, { max: 100, windowMs: 1000 }, 200);
    const org = newOrg();
    const p = granted(await b.acquire(org, ids));
    await b.settle(org, p.tokenId, p.permitId);
    granted(await b.acquire(org, ids));
    const q = granted(await b.acquire(org, ids));
    await b.abandon(org, q.tokenId, q.permitId);
    await b.block(org, ids[0] ?? '', 'indefinite', '401');
    await b.block(org, null, 60_000, '429');
    await b.peek(org, ids);

    const keys = (await redis.keys(`${prefix}:*`)).filter((k) => k.includes(`{${org}}`));
    const [t1 = '', t2 = ''] = ids;
    expect(keys.sort()).toEqual(
      [
        b.keys.orgLog(org),
        b.keys.orgInflight(org),
        b.keys.orgBlock(org),
        b.keys.tokenLog(org, t1),
        b.keys.tokenBlock(org, t1),
        b.keys.tokenInflight(org, t2),
      ].sort(),
    );
    for (const key of keys) {
      // The first {...} of a key is its Redis Cluster hash tag: one slot per organization.
      expect(key).toMatch(new RegExp(`^${prefix}:\\{${org}\\}:lim:`));
      expect(/\{([^}]*)\}/.exec(key)?.[1]).toBe(org);
      const ttl = await redis.pttl(key);
      if (key === b.keys.tokenBlock(org, ids[0] ?? '')) expect(ttl).toBe(-1);
      else expect(ttl).toBeGreaterThan(0);
    }
    const everything = (await dumpPrefix(redis, prefix)).join('\n');
    for (const secret of secrets) expect(everything).not.toContain(secret);
  });
});
