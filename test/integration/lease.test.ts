// The per-learner lease of acquire.lua on a real Redis: one call in flight per learner, a lease past its
// deadline contested for the grace before a takeover, a job that lost its BullMQ lock gets nothing, and
// finish-attempt.lua frees only its own lease. Waits are checked exactly against the `now` the scripts
// return (Redis TIME), never the test's clock. A lease or a grace that must run out is 300 ms; one that
// must still hold when the test asks again is 30 s, so a stalled test cannot see it run out first.
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { createKeys } from '../../src/core/keys.ts';
import { TransferBudget, type Acquired, type Refused } from '../../src/limiter/index.ts';
import type { LeaseRequest } from '../../src/limiter/types.ts';
import { OutcomeStore } from '../../src/outcomes/store.ts';
import { deletePrefix, newRedis, randomPrefix } from '../helpers/redis.ts';
import { granted } from '../helpers/limiter.ts';

/** The in-flight TTL of `budget` and the grace of `lease()`: short, for what must run out. */
const TTL = 300;
const GRACE = 300;
/** The in-flight TTL of `steady`, and a grace that must hold: no stall of a test outlasts them. */
const LONG = 30_000;
const TOKEN = 'tok-a';

const redis = newRedis();
const prefix = randomPrefix('lease');
const keys = createKeys(prefix);
const budget = new TransferBudget(redis, {
  prefix,
  limitPerToken: { max: 1000, windowMs: 60_000 },
  limitPerOrg: { max: 1000, windowMs: 60_000 },
  inflightTtlMs: TTL,
});
/** The same budget (same keys) with a long in-flight TTL: a lease it grants outlives the test's asks. */
const steady = new TransferBudget(redis, {
  prefix,
  limitPerToken: { max: 1000, windowMs: 60_000 },
  limitPerOrg: { max: 1000, windowMs: 60_000 },
  inflightTtlMs: LONG,
});
const store = new OutcomeStore(redis, keys);
let orgs = 0;
/** Each test works on its own organization: its own lease hash and budget. */
const newOrg = () => `lease${++orgs}`;

afterAll(async () => {
  await deletePrefix(redis, prefix);
  await redis.quit();
});

function lease(learnerId: number, holder: string, extra: Partial<LeaseRequest> = {}): LeaseRequest {
  return { learnerId, holder, lockKey: '', lockToken: '', graceMs: GRACE, ...extra };
}

function refused(r: Acquired | Refused): Refused {
  if (r.ok) throw new Error(`expected a refusal, got a permit ${r.permitId}`);
  return r;
}

/** Sleeps past a wait (timers may fire a ms early). */
const wake = (waitMs: number) => sleep(waitMs + 5);

const leaseOf = (org: string, learnerId: number) => redis.hget(keys.lease(org), String(learnerId));

describe('learner lease (acquire.lua)', () => {
  it('grants a lease per learner and refuses another holder until its deadline', async () => {
    const org = newOrg();
    const a = granted(await steady.acquire(org, [TOKEN], lease(7, 'A')));
    expect(a.tookOver).toBe(false);
    expect(await leaseOf(org, 7)).toBe(`A ${a.now + LONG} 0`);

    const b = refused(await steady.acquire(org, [TOKEN], lease(7, 'B')));
    expect(b.scope).toBe('lease');
    expect(b.allBlockedIndefinitely).toBe(false);
    // The wait is exactly what is left of A's deadline.
    expect(b.now).toBeLessThan(a.now + LONG);
    expect(b.waitMs).toBe(a.now + LONG - b.now);
    // The refusal wrote no permit and left A's lease as it was.
    expect((await steady.peek(org, [TOKEN])).org.inflight).toBe(1);
    expect(await leaseOf(org, 7)).toBe(`A ${a.now + LONG} 0`);

    // Leases are per learner: B gets learner 8 at once.
    const b8 = granted(await steady.acquire(org, [TOKEN], lease(8, 'B')));
    expect(b8.tookOver).toBe(false);
    expect(await leaseOf(org, 8)).toBe(`B ${b8.now + LONG} 0`);
    expect((await steady.peek(org, [TOKEN])).org.inflight).toBe(2);
  });

  it('contests an expired lease for the grace, then takes it over', async () => {
    const org = newOrg();
    const a = granted(await budget.acquire(org, [TOKEN], lease(7, 'A')));
    const deadline = a.now + TTL;
    await wake(deadline - (await budget.peek(org, [TOKEN])).now);

    // A never finished: B's first ask after the deadline marks the lease contested and is refused.
    const first = refused(await budget.acquire(org, [TOKEN], lease(7, 'B')));
    expect(first.now).toBeGreaterThanOrEqual(deadline);
    expect(first.scope).toBe('lease');
    expect(first.waitMs).toBe(GRACE);
    expect(await leaseOf(org, 7)).toBe(`A ${deadline} ${first.now}`);
    // Marking it contested wrote no permit for B (A's expired one counts as used).
    const view = await budget.peek(org, [TOKEN]);
    expect(view.org.inflight).toBe(0);
    expect(view.org.used).toBe(1);

    // Past the short grace, an ask with a long one is still inside it (each ask brings its grace, and
    // no stall outlasts 30 s): refused with exactly what is left of it; the mark is not moved.
    await wake(first.now + GRACE - (await budget.peek(org, [TOKEN])).now);
    const second = refused(await budget.acquire(org, [TOKEN], lease(7, 'B', { graceMs: LONG })));
    expect(second.scope).toBe('lease');
    expect(second.now).toBeGreaterThanOrEqual(first.now + GRACE);
    expect(second.waitMs).toBe(first.now + LONG - second.now);
    expect(await leaseOf(org, 7)).toBe(`A ${deadline} ${first.now}`);

    // With the short grace run out, the takeover.
    const took = granted(await budget.acquire(org, [TOKEN], lease(7, 'B')));
    expect(took.now).toBeGreaterThanOrEqual(first.now + GRACE);
    expect(took.tookOver).toBe(true);
    expect(await leaseOf(org, 7)).toBe(`B ${took.now + TTL} 0`);
    // B's own next ask is a plain renewal, not another takeover.
    const again = granted(await budget.acquire(org, [TOKEN], lease(7, 'B')));
    expect(again.tookOver).toBe(false);
  });

  it('a holder that records its response within the grace frees the lease: no takeover', async () => {
    const org = newOrg();
    const a = granted(await budget.acquire(org, [TOKEN], lease(7, 'A')));
    await wake(a.now + TTL - (await budget.peek(org, [TOKEN])).now);
    const contest = refused(await budget.acquire(org, [TOKEN], lease(7, 'B', { graceMs: LONG })));
    expect(contest.waitMs).toBe(LONG);
    // A was alive, only slow: its finish (inside the grace) frees its contested lease.
    await store.finish({
      org,
      learnerId: 7,
      runId: 'r1',
      at: Date.now(),
      attemptId: 'a-late',
      holder: 'A',
      permit: {
        tokenId: a.tokenId,
        permitId: a.permitId,
        mode: 'response',
        tokenKeyTtlMs: budget.keyTtls.tokenMs,
        orgKeyTtlMs: budget.keyTtls.orgMs,
      },
    });
    expect(await leaseOf(org, 7)).toBeNull();
    const b = granted(await budget.acquire(org, [TOKEN], lease(7, 'B', { graceMs: LONG })));
    expect(b.now).toBeLessThan(contest.now + LONG);
    expect(b.tookOver).toBe(false);
  });

  it('a holder asking again while its lease is live is granted and its deadline renewed', async () => {
    const org = newOrg();
    const a = granted(await steady.acquire(org, [TOKEN], lease(7, 'A')));
    await sleep(20);
    const renewed = granted(await steady.acquire(org, [TOKEN], lease(7, 'A')));
    expect(renewed.tookOver).toBe(false);
    expect(renewed.now).toBeGreaterThan(a.now);
    expect(renewed.permitId).not.toBe(a.permitId);
    // The script writes a fresh lease: new deadline, not contested. Both permits are in flight.
    expect(await leaseOf(org, 7)).toBe(`A ${renewed.now + LONG} 0`);
    expect((await steady.peek(org, [TOKEN])).org.inflight).toBe(2);
    // Another holder is now refused until the renewed deadline, not the first one.
    const b = refused(await steady.acquire(org, [TOKEN], lease(7, 'B')));
    expect(b.scope).toBe('lease');
    expect(b.waitMs).toBe(renewed.now + LONG - b.now);
  });

  it('a holder whose expired lease is being contested gets it back (it is alive) and the mark is cleared', async () => {
    const org = newOrg();
    const a = granted(await budget.acquire(org, [TOKEN], lease(7, 'A')));
    await wake(a.now + TTL - (await budget.peek(org, [TOKEN])).now);
    const contest = refused(await budget.acquire(org, [TOKEN], lease(7, 'B', { graceMs: LONG })));
    expect(contest.waitMs).toBe(LONG);
    // A asks again (through the long-TTL budget, so its renewed lease outlasts B's next ask).
    const back = granted(await steady.acquire(org, [TOKEN], lease(7, 'A', { graceMs: LONG })));
    expect(back.tookOver).toBe(false);
    expect(await leaseOf(org, 7)).toBe(`A ${back.now + LONG} 0`);
    const b = refused(await steady.acquire(org, [TOKEN], lease(7, 'B', { graceMs: LONG })));
    expect(b.waitMs).toBe(back.now + LONG - b.now);
  });

  it("refuses 'lost-lock' when the job's BullMQ lock holds another token, writing nothing", async () => {
    const org = newOrg();
    const lockKey = keys.jobLock(org, 'l7');
    await redis.set(lockKey, 'other-worker-token');
    const r = refused(
      await steady.acquire(org, [TOKEN], lease(7, 'mine', { lockKey, lockToken: 'my-token' })),
    );
    expect(r.scope).toBe('lost-lock');
    expect(r.allBlockedIndefinitely).toBe(false);
    const view = await steady.peek(org, [TOKEN]);
    expect(view.org.inflight).toBe(0);
    expect(view.tokens[0]?.inflight).toBe(0);
    expect(view.org.used).toBe(0);
    expect(await leaseOf(org, 7)).toBeNull();

    // A lock that is gone altogether is lost too.
    const gone = keys.jobLock(org, 'l9');
    const r2 = refused(
      await steady.acquire(org, [TOKEN], lease(9, 'mine', { lockKey: gone, lockToken: 'x' })),
    );
    expect(r2.scope).toBe('lost-lock');
    expect(await leaseOf(org, 9)).toBeNull();

    // With the token the lock holds, the permit and the lease are granted together.
    const ok = granted(
      await steady.acquire(org, [TOKEN], lease(7, 'mine', { lockKey, lockToken: 'other-worker-token' })),
    );
    expect(ok.tookOver).toBe(false);
    expect(await leaseOf(org, 7)).toBe(`mine ${ok.now + LONG} 0`);
    expect((await steady.peek(org, [TOKEN])).org.inflight).toBe(1);
    // The lock token was checked, not written.
    expect(await redis.get(lockKey)).toBe('other-worker-token');
  });

  it("finish() frees the lease of its own holder and settles the permit; another holder's finish leaves it", async () => {
    const org = newOrg();
    const a = granted(await steady.acquire(org, [TOKEN], lease(7, 'A')));
    const permit = {
      tokenId: a.tokenId,
      permitId: a.permitId,
      mode: 'response' as const,
      tokenKeyTtlMs: steady.keyTtls.tokenMs,
      orgKeyTtlMs: steady.keyTtls.orgMs,
    };
    const base = { org, learnerId: 7, runId: 'r1', at: Date.now() };

    // Another holder's finish (a stale attempt): A's lease stays, and so does A's permit.
    await store.finish({ ...base, attemptId: 'other-1', holder: 'B' });
    // A holder whose name only starts like A's does not free it either.
    await store.finish({ ...base, attemptId: 'other-2', holder: 'A-' });
    expect(await leaseOf(org, 7)).toBe(`A ${a.now + LONG} 0`);
    expect((await steady.peek(org, [TOKEN])).org.inflight).toBe(1);

    await store.finish({ ...base, attemptId: 'a-1', holder: 'A', permit });
    expect(await leaseOf(org, 7)).toBeNull();
    const view = await steady.peek(org, [TOKEN]);
    expect(view.org.inflight).toBe(0);
    expect(view.org.used).toBe(1);
    expect(view.tokens[0]?.inflight).toBe(0);
    expect(view.tokens[0]?.used).toBe(1);
    // No update: the record was not touched.
    expect(await store.get(org, 7)).toBeUndefined();

    // With the lease freed, B gets learner 7 at once, without a takeover.
    const b = granted(await steady.acquire(org, [TOKEN], lease(7, 'B')));
    expect(b.tookOver).toBe(false);
  });

  it('finish() of holder A does not free the lease of holder AB (a holder is matched whole)', async () => {
    const org = newOrg();
    const ab = granted(await steady.acquire(org, [TOKEN], lease(7, 'AB')));
    const a = refused(await steady.acquire(org, [TOKEN], lease(7, 'A')));
    expect(a.scope).toBe('lease');
    await store.finish({ org, learnerId: 7, runId: 'r1', at: Date.now(), attemptId: 'x', holder: 'A' });
    expect(await leaseOf(org, 7)).toBe(`AB ${ab.now + LONG} 0`);
  });
});
