// Claims (claim.lua) on a real Redis: one organization per learner under a prefix, first claim wins,
// even with two producers racing on two connections; and the producer's use of them: a learner held by
// another organization is left there (and said so), moved only with { move: true } once it is final
// there, with the move written in the new organization's audit stream.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type AppContext } from '../../src/app/context.ts';
import { Claims, type ClaimResult } from '../../src/claims/claims.ts';
import { loadConfig } from '../../src/core/config.ts';
import { createKeys } from '../../src/core/keys.ts';
import { createLogger } from '../../src/core/log.ts';
import { jobIdOf } from '../../src/queue/job.ts';
import type { ClaimedElsewhereItem } from '../../src/queue/producer.ts';
import { deletePrefix, newRedis, randomPrefix, REDIS_URL } from '../helpers/redis.ts';

const redis = newRedis();
const other = newRedis();
const prefix = randomPrefix('claims');
const keys = createKeys(prefix);
let ctx: AppContext;

beforeAll(async () => {
  const config = loadConfig({
    REDIS_URL,
    QUEUE_PREFIX: prefix,
    LEARNER_API_TOKENS: 'acme:a1,beta:b1',
    LOG_LEVEL: 'silent',
  });
  ctx = await createContext(config, { redis, logger: createLogger({ level: 'silent' }) });
});

afterAll(async () => {
  await ctx?.close();
  await deletePrefix(redis, prefix);
  await redis.quit();
  await other.quit();
});

describe('Claims', () => {
  it('first claim wins; the same organization again is ok; move takes it over', async () => {
    const claims = new Claims(redis, keys);
    expect(await claims.claim([{ org: 'acme', learnerId: 1 }])).toEqual([{ kind: 'ok' }]);
    expect(await claims.claim([{ org: 'beta', learnerId: 1 }])).toEqual([
      { kind: 'elsewhere', holder: 'acme' },
    ]);
    expect(await claims.holders([1])).toEqual(['acme']);
    expect(await claims.claim([{ org: 'acme', learnerId: 1 }])).toEqual([{ kind: 'ok' }]);
    expect(await claims.holders([1])).toEqual(['acme']);

    expect(await claims.claim([{ org: 'beta', learnerId: 1 }], 'move')).toEqual([
      { kind: 'moved', from: 'acme' },
    ]);
    expect(await claims.holders([1, 2])).toEqual(['beta', undefined]);
    // A move of an unclaimed learner, or of one the organization holds, is a plain claim.
    expect(
      await claims.claim(
        [
          { org: 'beta', learnerId: 1 },
          { org: 'gamma', learnerId: 2 },
        ],
        'move',
      ),
    ).toEqual([{ kind: 'ok' }, { kind: 'ok' }]);
    expect(await claims.holders([1, 2])).toEqual(['beta', 'gamma']);
  });

  it('a batch is answered item by item, in order, across chunks of 1000', async () => {
    const claims = new Claims(redis, keys);
    const ids = Array.from({ length: 2500 }, (_, i) => 100_000 + i);
    await claims.claim(ids.filter((id) => id % 7 === 0).map((learnerId) => ({ org: 'beta', learnerId })));
    const results = await claims.claim(ids.map((learnerId) => ({ org: 'acme', learnerId })));
    expect(results).toHaveLength(ids.length);
    results.forEach((r, i) => {
      const id = ids[i] as number;
      expect(r).toEqual(id % 7 === 0 ? { kind: 'elsewhere', holder: 'beta' } : { kind: 'ok' });
    });
    const holders = await claims.holders(ids);
    holders.forEach((h, i) => expect(h).toBe((ids[i] as number) % 7 === 0 ? 'beta' : 'acme'));
  });

  it('two producers racing on two connections: every learner is won by exactly one organization', async () => {
    const a = new Claims(redis, keys);
    const b = new Claims(other, keys);
    const ids = Array.from({ length: 500 }, (_, i) => 200_000 + i);
    // Both connections up first, so neither gets a head start from its connect.
    await Promise.all([redis.ping(), other.ping()]);
    // One call per learner, in opposite orders, issued alternately on the two connections: their
    // scripts interleave in Redis and meet somewhere in the middle.
    const pa: Promise<ClaimResult[]>[] = [];
    const pb: Promise<ClaimResult[]>[] = [];
    for (let i = 0; i < ids.length; i++) {
      pa.push(a.claim([{ org: 'acme', learnerId: ids[i] as number }]));
      pb.push(b.claim([{ org: 'beta', learnerId: ids[ids.length - 1 - i] as number }]));
    }
    const [ra, rb] = await Promise.all([Promise.all(pa), Promise.all(pb)]);
    rb.reverse();
    const holders = await a.holders(ids);
    let acmeWon = 0;
    ids.forEach((_, i) => {
      const [x] = ra[i] ?? [];
      const [y] = rb[i] ?? [];
      const holder = holders[i];
      expect(holder === 'acme' || holder === 'beta').toBe(true);
      if (holder === 'acme') {
        acmeWon++;
        expect(x).toEqual({ kind: 'ok' });
        expect(y).toEqual({ kind: 'elsewhere', holder: 'acme' });
      } else {
        expect(y).toEqual({ kind: 'ok' });
        expect(x).toEqual({ kind: 'elsewhere', holder: 'beta' });
      }
    });
    // Both really raced (the orders were opposite): each won some.
    expect(acmeWon).toBeGreaterThan(0);
    expect(acmeWon).toBeLessThan(ids.length);

    // Whole batches racing: still one winner per learner.
    const more = Array.from({ length: 500 }, (_, i) => 300_000 + i);
    const [ba, bb] = await Promise.all([
      a.claim(more.map((learnerId) => ({ org: 'acme', learnerId }))),
      b.claim(more.map((learnerId) => ({ org: 'beta', learnerId }))),
    ]);
    const moreHolders = await b.holders(more);
    more.forEach((_, i) => {
      const winner = moreHolders[i];
      expect(ba[i]).toEqual(winner === 'acme' ? { kind: 'ok' } : { kind: 'elsewhere', holder: 'beta' });
      expect(bb[i]).toEqual(winner === 'beta' ? { kind: 'ok' } : { kind: 'elsewhere', holder: 'acme' });
    });
  });
});

describe('Producer and claims', () => {
  const RUN = 'run-claims';

  it('a learner held by acme is left there when beta enqueues it, and onClaimedElsewhere says why', async () => {
    const id = 4101;
    const first = await ctx.producer.add([{ org: 'acme', learnerId: id, source: 'a.csv:2' }], RUN);
    expect(first.enqueued).toBe(1);
    const held: ClaimedElsewhereItem[] = [];
    const counts = await ctx.producer.add([{ org: 'beta', learnerId: id, source: 'b.csv:2' }], RUN, {
      onClaimedElsewhere: (h) => void held.push(h),
    });
    expect(counts.claimedElsewhere).toEqual({ acme: 1 });
    expect(counts.enqueued).toBe(0);
    expect(counts.moved).toBe(0);
    expect(held).toHaveLength(1);
    expect(held[0]?.holder).toBe('acme');
    expect(held[0]?.item).toMatchObject({ org: 'beta', learnerId: id });
    expect(held[0]?.reason).toContain(String(id));
    expect(held[0]?.reason).toContain('acme');
    // Nothing of it in beta: no record, no job; the claim is acme's.
    expect(await ctx.store.get('beta', id)).toBeUndefined();
    expect(await ctx.queues.get('beta').getJob(jobIdOf(id))).toBeUndefined();
    expect(await ctx.claims.holders([id])).toEqual(['acme']);
  });

  it("with { move: true } and acme's record final, the learner moves to beta and the move is audited", async () => {
    const id = 4102;
    await ctx.producer.add([{ org: 'acme', learnerId: id, source: 'a.csv:3' }], RUN);
    await ctx.store.recordAttempt('acme', id, RUN, {
      bucket: 'transferred',
      code: 'transferred',
      status: 200,
      durationMs: 5,
      transferId: 'T4102',
      countsAsAttempt: true,
    });
    const held: ClaimedElsewhereItem[] = [];
    const counts = await ctx.producer.add(
      [{ org: 'beta', learnerId: id, source: 'desired.csv:7' }],
      'run-move',
      {
        move: true,
        onClaimedElsewhere: (h) => void held.push(h),
      },
    );
    expect(counts.moved).toBe(1);
    expect(counts.enqueued).toBe(1);
    expect(counts.claimedElsewhere).toEqual({});
    expect(held).toEqual([]);
    expect(await ctx.claims.holders([id])).toEqual(['beta']);
    expect((await ctx.store.get('beta', id))?.b).toBe('queued');
    expect(await ctx.queues.get('beta').getJobState(jobIdOf(id))).toBe('waiting');

    const entries = [];
    for await (const e of ctx.store.audit('beta')) entries.push(e);
    const moves = entries.filter((e) => e.kind === 'claim-move' && e.learnerId === id);
    expect(moves).toHaveLength(1);
    expect(moves[0]?.runId).toBe('run-move');
    expect(moves[0]?.result).toMatchObject({ claimMoved: { from: 'acme', to: 'beta', by: 'desired.csv:7' } });
    // acme's audit has no move entry; its record stays as it was.
    for await (const e of ctx.store.audit('acme'))
      expect(e.learnerId === id && e.kind === 'claim-move').toBe(false);
    expect((await ctx.store.get('acme', id))?.b).toBe('transferred');
  });

  it("with { move: true } and acme's record still queued, the learner is held, not moved", async () => {
    const id = 4103;
    await ctx.producer.add([{ org: 'acme', learnerId: id, source: 'a.csv:4' }], RUN);
    const held: ClaimedElsewhereItem[] = [];
    const counts = await ctx.producer.add([{ org: 'beta', learnerId: id, source: 'b.csv:4' }], RUN, {
      move: true,
      onClaimedElsewhere: (h) => void held.push(h),
    });
    expect(counts.moved).toBe(0);
    expect(counts.enqueued).toBe(0);
    expect(counts.claimedElsewhere).toEqual({ acme: 1 });
    expect(held[0]?.reason).toContain(String(id));
    expect(held[0]?.reason).toContain('queued');
    expect(held[0]?.reason).toContain('acme');
    expect(await ctx.claims.holders([id])).toEqual(['acme']);
    expect(await ctx.store.get('beta', id)).toBeUndefined();
    for await (const e of ctx.store.audit('beta')) expect(e.learnerId).not.toBe(id);
  });

  it("with { move: true } and acme's record final but a call in flight (lease held), it is held", async () => {
    const id = 4104;
    await ctx.producer.add([{ org: 'acme', learnerId: id, source: 'a.csv:5' }], RUN);
    await ctx.store.recordAttempt('acme', id, RUN, {
      bucket: 'server-error',
      code: 'server-error',
      status: 500,
      durationMs: 5,
      countsAsAttempt: true,
    });
    await redis.hset(keys.lease('acme'), String(id), `someone ${Date.now() + 60_000} 0`);
    const held: ClaimedElsewhereItem[] = [];
    const counts = await ctx.producer.add([{ org: 'beta', learnerId: id, source: 'b.csv:5' }], RUN, {
      move: true,
      onClaimedElsewhere: (h) => void held.push(h),
    });
    expect(counts.moved).toBe(0);
    expect(counts.claimedElsewhere).toEqual({ acme: 1 });
    expect(held[0]?.reason).toContain('in flight');
    expect(await ctx.claims.holders([id])).toEqual(['acme']);

    // Once the lease is freed, the failed learner moves.
    await redis.hdel(keys.lease('acme'), String(id));
    const again = await ctx.producer.add([{ org: 'beta', learnerId: id, source: 'b.csv:5' }], RUN, {
      move: true,
    });
    expect(again.moved).toBe(1);
    expect(await ctx.claims.holders([id])).toEqual(['beta']);
  });
});
