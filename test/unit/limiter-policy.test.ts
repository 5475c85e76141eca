// The organization's live policy in the limiter: limits, token limits of their own, the
// reserve, pauses, the key TTLs, the fallback without a policy, seeding and the mismatch warning, and the
// change log. Real Redis, compressed real time, one organization per test.
import { afterAll, describe, expect, it } from 'vitest';
import { readChanges } from '../../src/limiter/control-log.ts';
import type { Rate } from '../../src/core/duration.ts';
import { TransferBudget, type BudgetEvent } from '../../src/limiter/index.ts';
import {
  envMismatchWarning,
  readPolicy,
  seedPolicies,
  seedPolicy,
  warnIfLimitsDiffer,
} from '../../src/limiter/policy.ts';
import { resetLimits, setLimits, setPaused } from '../../src/limiter/policy-control.ts';
import { createLogger } from '../../src/core/log.ts';
import { deletePrefix, newRedis, randomPrefix } from '../helpers/redis.ts';
import { granted, refused } from '../helpers/limiter.ts';

const redis = newRedis();
const prefix = randomPrefix('policy');
let orgs = 0;
const newOrg = () => `porg${++orgs}`;
const WHO = 'cli:tester@host';

afterAll(async () => {
  await deletePrefix(redis, prefix);
  await redis.quit();
});

function budget(limitPerToken: Rate, limitPerOrg: Rate, inflightTtlMs = 5_000): TransferBudget {
  return new TransferBudget(redis, { prefix, limitPerToken, limitPerOrg, inflightTtlMs });
}

/** Acquires (and settles) until refused; returns the permits granted per token. */
async function drain(b: TransferBudget, org: string, pool: string[]): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (let i = 0; i < 100; i++) {
    const r = await b.acquire(org, pool);
    if (!r.ok) return out;
    out[r.tokenId] = (out[r.tokenId] ?? 0) + 1;
    await b.settle(org, r.tokenId, r.permitId);
  }
  throw new Error('drain: never refused');
}

const fallback = {
  limitPerToken: { max: 10, windowMs: 60_000 },
  limitPerOrg: { max: 100, windowMs: 60_000 },
};

/** The limiter's own keys of an organization (the policy hash aside) with their contents. */
async function limiterState(org: string): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  for (const key of (await redis.keys(`${prefix}:{${org}}:lim:*`)).sort()) {
    out[key] = await redis.zrange(key, 0, -1, 'WITHSCORES');
  }
  return out;
}

describe('policy limits in acquire', () => {
  it('without a stored policy, the fallback limits apply (benchmarks, tests that never seed)', async () => {
    const b = budget({ max: 3, windowMs: 60_000 }, { max: 100, windowMs: 60_000 });
    const org = newOrg();
    expect(await drain(b, org, ['t1'])).toEqual({ t1: 3 });
    expect((await readPolicy(redis, b.keys, org)).stored).toBe(false);
  });

  it('the stored limits win over the fallback, for every process whatever its LIMIT_*', async () => {
    const org = newOrg();
    const b = budget(fallback.limitPerToken, fallback.limitPerOrg);
    await setLimits(redis, b.keys, org, { perToken: { max: 2, windowMs: 60_000 } }, fallback, WHO);
    // Another process with a laxer environment follows Redis too.
    const other = budget({ max: 50, windowMs: 1000 }, { max: 500, windowMs: 1000 });
    expect(await drain(other, org, ['t1', 't2'])).toEqual({ t1: 2, t2: 2 });
    const r = refused(await b.acquire(org, ['t1', 't2']));
    expect(r.scope).toBe('token');
    // The wait comes from the stored window (60 s), not the other process's 1 s.
    expect(r.waitMs).toBeGreaterThan(50_000);
  });

  it("a token's own limit overrides the default per token", async () => {
    const org = newOrg();
    const b = budget(fallback.limitPerToken, fallback.limitPerOrg);
    await setLimits(redis, b.keys, org, { perToken: { max: 4, windowMs: 60_000 } }, fallback, WHO);
    await setLimits(
      redis,
      b.keys,
      org,
      { perToken: { max: 1, windowMs: 60_000 }, tokenId: 'slow' },
      fallback,
      WHO,
    );
    expect(await drain(b, org, ['slow', 'fast'])).toEqual({ slow: 1, fast: 4 });
    const view = await b.peek(org, ['slow', 'fast']);
    expect(view.tokens.map((t) => [t.tokenId, t.limit, t.override, t.remaining])).toEqual([
      ['slow', 1, true, 0],
      ['fast', 4, false, 0],
    ]);
  });

  it('a lowered limit holds at the next acquire: what was granted before still counts', async () => {
    const org = newOrg();
    const b = budget(fallback.limitPerToken, fallback.limitPerOrg);
    await seedPolicy(redis, b.keys, org, fallback);
    for (let i = 0; i < 5; i++) granted(await b.acquire(org, ['t1']));
    await setLimits(redis, b.keys, org, { perToken: { max: 3, windowMs: 60_000 } }, fallback, WHO);
    expect(refused(await b.acquire(org, ['t1'])).scope).toBe('token');
    // Raised again: granted at once, up to the new limit.
    await setLimits(redis, b.keys, org, { perToken: { max: 7, windowMs: 60_000 } }, fallback, WHO);
    expect(await drain(b, org, ['t1'])).toEqual({ t1: 2 });
  });
});

describe('reserve', () => {
  it('keeps N permits of each org window for the other clients: never granted', async () => {
    const org = newOrg();
    const b = budget(fallback.limitPerToken, { max: 5, windowMs: 60_000 });
    await setLimits(redis, b.keys, org, { reserve: { count: 2 } }, fallback, WHO);
    // Nothing else is stored: the org limit is this process's 5, less the reserve of 2.
    expect(await drain(b, org, ['t1'])).toEqual({ t1: 3 });
    const r = refused(await b.acquire(org, ['t1']));
    expect(r.scope).toBe('org');
    const view = await b.peek(org, ['t1']);
    expect(view.org).toMatchObject({ limit: 3, used: 3, remaining: 0 });
    expect(view.reserve).toBe(2);
  });

  it('a share is stored resolved against the org limit, and follows a later --per-org', async () => {
    const org = newOrg();
    const b = budget(fallback.limitPerToken, fallback.limitPerOrg);
    await setLimits(
      redis,
      b.keys,
      org,
      { perOrg: { max: 10, windowMs: 60_000 }, reserve: { share: 25 } },
      fallback,
      WHO,
    );
    let p = await readPolicy(redis, b.keys, org);
    expect(p.reserve).toBe(3); // ceil(10 * 25%): the other clients' side of the rounding
    expect(p.reserveShare).toBe(25);
    await setLimits(redis, b.keys, org, { perOrg: { max: 40, windowMs: 60_000 } }, fallback, WHO);
    p = await readPolicy(redis, b.keys, org);
    expect(p.reserve).toBe(10);
    const spent = await drain(b, org, ['t1', 't2', 't3', 't4']);
    expect(Object.values(spent).reduce((a, n) => a + n, 0)).toBe(30); // 40 less the reserve of 10
    // A reserve as a number replaces the share.
    await setLimits(redis, b.keys, org, { reserve: { count: 40 } }, fallback, WHO);
    p = await readPolicy(redis, b.keys, org);
    expect([p.reserve, p.reserveShare]).toEqual([40, null]);
  });

  it('a reserve as large as the org limit leaves nothing: refused with scope org', async () => {
    const org = newOrg();
    const b = budget(fallback.limitPerToken, { max: 5, windowMs: 60_000 });
    await setLimits(redis, b.keys, org, { reserve: { count: 5 } }, fallback, WHO);
    const r = refused(await b.acquire(org, ['t1']));
    expect(r.scope).toBe('org');
    expect(r.allBlockedIndefinitely).toBe(false);
    expect((await b.peek(org, ['t1'])).org.limit).toBe(0);
  });
});

describe('pause and resume', () => {
  it('a paused organization gets nothing (paused, for good), writes nothing, and a resume is announced', async () => {
    const org = newOrg();
    const b = budget(fallback.limitPerToken, fallback.limitPerOrg);
    const sub = newRedis();
    const events: BudgetEvent[] = [];
    await sub.subscribe(b.keys.limiterEvents(org));
    sub.on('message', (_c: string, m: string) => events.push(JSON.parse(m) as BudgetEvent));
    try {
      const first = granted(await b.acquire(org, ['t1']));
      const paused = await setPaused(redis, b.keys, org, null, true, WHO);
      expect(paused.after.paused?.who).toBe(WHO);
      const before = await limiterState(org);
      const r = refused(await b.acquire(org, ['t1']));
      expect(r).toMatchObject({ scope: 'paused', allBlockedIndefinitely: true });
      expect(await limiterState(org)).toEqual(before);
      // The call in flight finishes as usual.
      await b.settle(org, first.tokenId, first.permitId);
      expect((await b.peek(org, ['t1'])).org.paused?.who).toBe(WHO);

      // A second pause keeps the first one's author and time, and logs nothing.
      const again = await setPaused(redis, b.keys, org, null, true, 'cli:other@host');
      expect(again.changeId).toBeNull();
      expect(again.after.paused).toEqual(paused.after.paused);

      await setPaused(redis, b.keys, org, null, false, WHO);
      granted(await b.acquire(org, ['t1']));
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(events).toEqual([
        { event: 'policy', org, tokenId: null, change: 'pause' },
        { event: 'policy', org, tokenId: null, change: 'pause' },
        { event: 'policy', org, tokenId: null, change: 'resume' },
      ]);
    } finally {
      await sub.quit();
    }
  });

  it('a paused token is skipped; every token paused refuses paused, for good', async () => {
    const org = newOrg();
    const b = budget({ max: 2, windowMs: 60_000 }, fallback.limitPerOrg);
    await setPaused(redis, b.keys, org, 'ta', true, WHO);
    expect(await drain(b, org, ['ta', 'tb'])).toEqual({ tb: 2 });
    // tb is spent, ta paused: the wait is tb's (ta is not usable), not 'paused'.
    expect(refused(await b.acquire(org, ['ta', 'tb'])).scope).toBe('token');
    await setPaused(redis, b.keys, org, 'tb', true, WHO);
    expect(refused(await b.acquire(org, ['ta', 'tb']))).toMatchObject({
      scope: 'paused',
      allBlockedIndefinitely: true,
    });
    const view = await b.peek(org, ['ta', 'tb']);
    expect(view.tokens.map((t) => t.paused?.who)).toEqual([WHO, WHO]);
    expect(view.org.paused).toBeNull();
    await setPaused(redis, b.keys, org, 'ta', false, WHO);
    expect(await drain(b, org, ['ta', 'tb'])).toEqual({ ta: 2 });
  });
});

describe('key TTLs under a policy', () => {
  it('the acquire computes TTLs from the windows in effect, and no settle shortens them', async () => {
    const org = newOrg();
    // The process's fallback window is 1 s; the policy's is 10 minutes.
    const b = budget({ max: 10, windowMs: 1000 }, { max: 100, windowMs: 1000 }, 2000);
    await setLimits(
      redis,
      b.keys,
      org,
      { perToken: { max: 10, windowMs: 600_000 }, perOrg: { max: 100, windowMs: 600_000 } },
      b.options,
      WHO,
    );
    const p = granted(await b.acquire(org, ['t1']));
    expect(p.keyTtls).toEqual({ tokenMs: 600_000 + 2000 + 1000, orgMs: 600_000 + 2000 + 1000 });
    expect(b.keyTtls).toEqual(p.keyTtls);
    await b.settle(org, p.tokenId, p.permitId);
    for (const key of [b.keys.tokenLog(org, 't1'), b.keys.orgLog(org)]) {
      expect(await redis.pttl(key)).toBeGreaterThan(590_000);
    }
    // A process that never saw the policy settles with its own short TTLs: the longer one stays.
    const stale = budget({ max: 10, windowMs: 1000 }, { max: 100, windowMs: 1000 }, 2000);
    const q = granted(await b.acquire(org, ['t1']));
    await stale.settle(org, q.tokenId, q.permitId);
    expect(await redis.pttl(b.keys.orgLog(org))).toBeGreaterThan(590_000);
    // A key with no TTL at all gets one (extend-only never leaves a key for ever).
    await redis.persist(b.keys.tokenLog(org, 't1'));
    const r = granted(await b.acquire(org, ['t1']));
    await stale.settle(org, r.tokenId, r.permitId);
    const ttl = await redis.pttl(b.keys.tokenLog(org, 't1'));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(600_000 + 3000);
  });
});

describe('seeding from LIMIT_* and the mismatch warning', () => {
  it('at start, reads the limits stored for every organization at once and warns for those that differ', async () => {
    const b = budget(fallback.limitPerToken, fallback.limitPerOrg);
    const orgs = [newOrg(), newOrg(), newOrg()];
    const other = { limitPerToken: { max: 25, windowMs: 2000 }, limitPerOrg: fallback.limitPerOrg };
    await seedPolicy(redis, b.keys, orgs[1] as string, fallback); // stored: 10/1m, this process: 25/2s
    await seedPolicy(redis, b.keys, orgs[2] as string, other); // stored as this process has them
    const lines: string[] = [];
    const logger = createLogger({ level: 'info', destination: { write: (l: string) => void lines.push(l) } });
    const warned = new Set<string>();
    await warnIfLimitsDiffer(redis, b.keys, orgs, other, logger, warned);
    await warnIfLimitsDiffer(redis, b.keys, orgs, other, logger, warned);
    await new Promise((resolve) => setTimeout(resolve, 50));
    const warns = lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.level === 40);
    // The one that differs, once; none for no stored policy (orgs[0]) or the same limits (orgs[2]).
    expect(warns.map((w) => w.org)).toEqual([orgs[1]]);
    expect(warns[0]?.msg).toContain('LIMIT_PER_TOKEN=25/2s (stored: 10/1m)');
  });

  it('seeds once, never overwrites, and a process with other LIMIT_* says so and follows Redis', async () => {
    const org = newOrg();
    const b = budget(fallback.limitPerToken, fallback.limitPerOrg);
    const first = await seedPolicy(redis, b.keys, org, fallback);
    expect(first.seeded).toBe(true);
    expect(first.policy.perToken).toEqual(fallback.limitPerToken);
    expect(first.policy.seededFrom).toEqual({ LIMIT_PER_TOKEN: '10/1m', LIMIT_PER_ORG: '100/1m' });

    const other = { limitPerToken: { max: 25, windowMs: 2000 }, limitPerOrg: fallback.limitPerOrg };
    const second = await seedPolicy(redis, b.keys, org, other);
    expect(second.seeded).toBe(false);
    expect(second.policy.perToken).toEqual(fallback.limitPerToken);

    const lines: string[] = [];
    const logger = createLogger({ level: 'info', destination: { write: (l: string) => void lines.push(l) } });
    await seedPolicies(redis, b.keys, [org], other, logger);
    await new Promise((resolve) => setTimeout(resolve, 50));
    const warn = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.level === 40);
    expect(warn?.msg).toContain('LIMIT_PER_TOKEN=25/2s (stored: 10/1m)');
    expect(warn?.msg).toContain('this process follows Redis');
    expect(warn?.msg).toContain(`limits reset --org ${org}`);
    expect(warn?.msg).not.toContain('LIMIT_PER_ORG');
    expect(warn).toMatchObject({ org, LIMIT_PER_TOKEN: '25/2s', storedPerToken: '10/1m' });
    // Same limits: no warning.
    expect(envMismatchWarning(org, second.policy, fallback)).toBeNull();
    // A LIMIT_* the environment leaves unset is a built-in default: never said to differ.
    expect(envMismatchWarning(org, second.policy, { ...other, limitVariablesSet: [] })).toBeNull();
    expect(
      envMismatchWarning(org, second.policy, { ...other, limitVariablesSet: ['LIMIT_PER_TOKEN'] }),
    ).toContain('LIMIT_PER_TOKEN=25/2s (stored: 10/1m)');

    // The process with 25/2s is held to the stored 10 per minute.
    const follower = budget(other.limitPerToken, other.limitPerOrg);
    expect(await drain(follower, org, ['t1'])).toEqual({ t1: 10 });

    // reset: back to the given LIMIT_*, without token limits of their own or a reserve.
    await setLimits(
      redis,
      b.keys,
      org,
      { perToken: { max: 1, windowMs: 1000 }, tokenId: 't9' },
      fallback,
      WHO,
    );
    await setLimits(redis, b.keys, org, { reserve: { count: 7 } }, fallback, WHO);
    const reset = await resetLimits(redis, b.keys, org, other, WHO);
    expect(reset.after).toMatchObject({
      perToken: other.limitPerToken,
      tokens: {},
      reserve: 0,
      seededFrom: { LIMIT_PER_TOKEN: '25/2s', LIMIT_PER_ORG: '100/1m' },
    });
  });
});

describe('seeding at the first acquire', () => {
  it("a budget with a seed hook seeds once per organization, before its first acquire; peek doesn't", async () => {
    const org = newOrg();
    const lines: string[] = [];
    const logger = createLogger({
      level: 'debug',
      destination: { write: (l: string) => void lines.push(l) },
    });
    let calls = 0;
    const b = new TransferBudget(redis, {
      prefix,
      ...fallback,
      inflightTtlMs: 5000,
      seed: async (o) => {
        calls++;
        await seedPolicies(redis, b.keys, [o], fallback, logger);
      },
    });
    await b.peek(org, ['t1']);
    expect(await redis.exists(b.keys.policy(org))).toBe(0);
    await Promise.all([b.acquire(org, ['t1']), b.acquire(org, ['t1'])]);
    await b.acquire(org, ['t1']);
    expect(calls).toBe(1);
    expect((await readPolicy(redis, b.keys, org)).perOrg).toEqual(fallback.limitPerOrg);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(lines.join('\n')).toContain('limits seeded in Redis from LIMIT_*');
  });
});

describe('change log', () => {
  it('every change is appended with who, what and the values before and after; no-ops are not', async () => {
    const org = newOrg();
    const b = budget(fallback.limitPerToken, fallback.limitPerOrg);
    await seedPolicy(redis, b.keys, org, fallback);
    await setLimits(redis, b.keys, org, { perToken: { max: 5, windowMs: 60_000 } }, fallback, WHO);
    await setPaused(redis, b.keys, org, 'tk', true, WHO);
    expect((await setPaused(redis, b.keys, org, null, false, WHO)).changeId).toBeNull(); // was not paused
    const entries = await readChanges(redis, b.keys, { org });
    expect(entries.map((e) => [e.action, e.who, e.tokenId])).toEqual([
      ['pause', WHO, 'tk'],
      ['limits.set', WHO, null],
    ]);
    expect(entries[1]?.details).toMatchObject({
      before: { perToken: '10/1m', perOrg: '100/1m' },
      after: { perToken: '5/1m', perOrg: '100/1m' },
    });
    expect(entries[0]?.details).toMatchObject({ before: { paused: null }, after: { paused: { who: WHO } } });
    expect(Date.parse(entries[0]?.at ?? '')).toBeGreaterThan(Date.now() - 60_000);
  });
});
