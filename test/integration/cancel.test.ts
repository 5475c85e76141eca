// cancel (ops/actions/cancel.ts, outcomes/cancel-learners.lua) on a real Redis and the simulator: each state a
// learner can be in, decided atomically against its lease and record; the job out of the queue, the claim
// released, the counters moved; a cancelled learner enqueued again is transferred; the worker ends the
// job of a cancelled learner it already holds with no call.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cancelLearners } from '../../src/ops/actions/cancel.ts';
import { retryFailed } from '../../src/ops/actions/retry.ts';
import { collectStatus } from '../../src/ops/views/status.ts';
import { progressOf } from '../../src/outcomes/run-progress.ts';
import { FAILURE_BUCKETS } from '../../src/outcomes/record.ts';
import { jobIdOf } from '../../src/queue/job.ts';
import { readChanges } from '../../src/limiter/control-log.ts';
import { startHarness, learnersNotIn, type Harness } from '../helpers/pipeline.ts';

let h: Harness;
const WHO = 'cli:tester@host';
beforeAll(async () => {
  h = await startHarness({ tag: 'cancel', sim: { learners: 120, forbiddenLearnerIds: [98] } });
});
afterAll(async () => {
  await h?.close();
});

const patched = (id: number) => h.sim.record.filter((r) => r.method === 'PATCH' && r.learnerId === id).length;

describe('cancel, learner by learner', () => {
  it('withdraws queued, retrying and held learners; leaves done, failed, in-flight and unknown ones', async () => {
    const [queued, retrying, held, done, failed, inFlight, staleLease] = learnersNotIn('acme', 7, 2);
    const ids = [queued, retrying, held, done, failed, inFlight, staleLease] as number[];
    const { runId } = await h.enqueueIds(ids);
    const { store, redis, keys, queues, claims } = h.ctx;
    const at = Date.now();
    const attempt = (id: number, bucket: 'retrying' | 'held' | 'transferred' | 'forbidden') =>
      store.recordAttempt(
        'acme',
        id,
        runId,
        {
          bucket,
          code: bucket === 'retrying' ? 'server-error' : bucket,
          durationMs: 1,
          countsAsAttempt: true,
        },
        at,
      );
    await attempt(retrying as number, 'retrying');
    await attempt(held as number, 'held');
    await attempt(done as number, 'transferred');
    await attempt(failed as number, 'forbidden');
    // A call in flight (its lease held), and a lease whose holder died long ago (past deadline + grace).
    await redis.hset(keys.lease('acme'), String(inFlight), `w1 ${at + 60_000} 0`);
    await redis.hset(keys.lease('acme'), String(staleLease), `w0 ${at - 60_000} 0`);
    expect(await store.inRunFailures('acme', runId, [held as number])).toEqual([true]);

    try {
      await checkCancel();
    } finally {
      await redis.hdel(keys.lease('acme'), String(inFlight), String(staleLease));
    }
    async function checkCancel() {
      const dry = await cancelLearners(h.ctx, { orgs: ['acme'], runId, dryRun: true }, WHO);
      expect(dry.cancelled).toBe(4);
      expect((await store.get('acme', queued as number))?.b).toBe('queued');
      expect(await queues.get('acme').getJob(jobIdOf(queued as number))).toBeDefined();

      const s = await cancelLearners(h.ctx, { orgs: ['acme'], runId }, WHO);
      expect(s.cancelled).toBe(4);
      expect(s.byOrg).toEqual({ acme: 4 });
      expect(s.inFlight).toEqual([{ org: 'acme', learnerId: inFlight }]);
      const reasons = Object.fromEntries(s.notCancellable.map((n) => [n.reason, n.count]));
      expect(reasons).toEqual({ done: 1, failed: 1 });
      for (const id of [queued, retrying, held, staleLease] as number[]) {
        const r = await store.get('acme', id);
        expect(r?.b).toBe('cancelled');
        expect(r?.cb).toBe(WHO);
        expect(r?.t).toBeGreaterThanOrEqual(at);
        expect(await queues.get('acme').getJob(jobIdOf(id))).toBeUndefined();
      }
      expect((await store.get('acme', inFlight as number))?.b).toBe('queued');
      expect(await queues.get('acme').getJob(jobIdOf(inFlight as number))).toBeDefined();
      // Claims: the cancelled ones' released, the others' kept.
      expect(await claims.holders([queued as number, done as number, inFlight as number])).toEqual([
        undefined,
        'acme',
        'acme',
      ]);
      // Counters: the run and the organization count them apart; held left the run's failure index.
      const run = await store.runCounts('acme', runId);
      expect(run).toMatchObject({ cancelled: 4, queued: 1, transferred: 1, forbidden: 1, total: 7 });
      expect(run.retrying ?? 0).toBe(0);
      expect(progressOf(run)).toMatchObject({ done: 1, failed: 1, waiting: 1, cancelled: 4, total: 7 });
      expect(await store.inRunFailures('acme', runId, [held as number])).toEqual([false]);
      expect(await store.bucketSize('acme', 'cancelled')).toBe(4);
      expect(FAILURE_BUCKETS).not.toContain('cancelled');
      // The change log: one entry with counts, not one per learner.
      const [change] = await readChanges(redis, keys, { count: 1 });
      expect(change).toMatchObject({ action: 'cancel', who: WHO, org: 'acme' });
      expect(change?.details).toMatchObject({ filter: `run ${runId}`, cancelled: 4, inFlight: 1 });
      // Again: nothing more to withdraw; the cancelled ones say so.
      const again = await cancelLearners(
        h.ctx,
        { orgs: ['acme'], learnerIds: [queued as number, 999_999] },
        WHO,
      );
      expect(again.cancelled).toBe(0);
      expect(Object.fromEntries(again.notCancellable.map((n) => [n.reason, n.count]))).toEqual({
        'already-cancelled': 1,
        unknown: 1,
      });
    }
  });

  it('a cancelled learner stays cancelled under retry-all, a crawl-like add and a late failure; a success replaces it', async () => {
    const [a, b] = learnersNotIn('acme', 2, 40);
    const { runId } = await h.enqueueIds([a, b] as number[]);
    await cancelLearners(h.ctx, { orgs: ['acme'], learnerIds: [a, b] as number[] }, WHO);
    const all = await retryFailed(h.ctx, { orgs: ['acme'], runId });
    expect(all.requeued).toBe(0);
    const counts = await h.ctx.producer.add(
      [{ org: 'acme', learnerId: a as number, source: 'crawl:page 1' }],
      runId,
    );
    expect(counts.alreadyDone).toEqual({ cancelled: 1 });
    await h.ctx.store.recordAttempt('acme', a as number, runId, {
      bucket: 'worker-error',
      code: 'worker-error',
      durationMs: 0,
      countsAsAttempt: false,
    });
    expect((await h.ctx.store.get('acme', a as number))?.b).toBe('cancelled');
    // A dead holder's replayed 200 is the truth: the transfer happened.
    await h.ctx.store.recordAttempt('acme', b as number, runId, {
      bucket: 'transferred',
      code: 'transferred',
      durationMs: 5,
      countsAsAttempt: true,
      transferId: 'x',
    });
    expect((await h.ctx.store.get('acme', b as number))?.b).toBe('transferred');
    expect(await h.ctx.store.runCounts('acme', runId)).toMatchObject({
      cancelled: 1,
      transferred: 1,
      total: 2,
    });
    // Named by its state: retry --status cancelled re-opens every cancelled learner (of the filter).
    const reopened = await retryFailed(h.ctx, { orgs: ['acme'], runId, status: 'cancelled' });
    expect(reopened.requeued).toBe(1);
    expect((await h.ctx.store.get('acme', a as number))?.b).toBe('queued');
    const again = await cancelLearners(h.ctx, { orgs: ['acme'], learnerIds: [a as number] }, WHO);
    expect(again.cancelled).toBe(1);
  });

  it('a cancelled learner enqueued again (CSV) or retried by id is transferred', async () => {
    const [a, b] = learnersNotIn('acme', 2, 60);
    const { runId } = await h.enqueueIds([a, b] as number[]);
    await cancelLearners(h.ctx, { orgs: ['acme'], runId }, WHO);
    expect(patched(a as number) + patched(b as number)).toBe(0);
    const { summary } = await h.enqueueIds([a as number]);
    expect(summary.enqueued).toBe(1);
    const retried = await retryFailed(h.ctx, { orgs: ['acme'], learnerIds: [b as number] });
    expect(retried.requeued).toBe(1);
    await h.workUntilIdle();
    for (const id of [a, b] as number[]) {
      expect((await h.ctx.store.get('acme', id))?.b).toBe('transferred');
      expect(patched(id)).toBe(1);
    }
    expect(await h.ctx.claims.holders([a as number, b as number])).toEqual(['acme', 'acme']);
  });

  it("the worker ends a cancelled learner's job it already holds with no call", async () => {
    const [a] = learnersNotIn('acme', 1, 80);
    const { runId } = await h.enqueueIds([a as number]);
    // As when the job was in a worker's hands at the cancel: the record is cancelled, the job stays.
    const [decision] = await h.ctx.store.cancel('acme', [a as number], {
      who: WHO,
      dryRun: false,
      leaseGraceMs: 1000,
      runIds: [runId],
    });
    expect(decision).toEqual({ kind: 'cancelled', runId });
    expect(await h.ctx.queues.get('acme').getJob(jobIdOf(a as number))).toBeDefined();
    await h.workUntilIdle();
    expect(patched(a as number)).toBe(0);
    expect((await h.ctx.store.get('acme', a as number))?.b).toBe('cancelled');
    expect(await h.ctx.queues.get('acme').getJob(jobIdOf(a as number))).toBeUndefined();
    expect(h.logLines.some((l) => l.includes('job for a cancelled learner: completed without a call'))).toBe(
      true,
    );
    const status = await collectStatus(h.ctx, ['acme']);
    expect(status.orgs[0]?.learners.cancelled).toBe(await h.ctx.store.bucketSize('acme', 'cancelled'));
  });

  it('records of the previous release (no cancelled bucket anywhere) read and count as before', async () => {
    const { store, redis, keys } = h.ctx;
    const old = { b: 'forbidden', r: 'r-old', q: 1, t: 2, a: 1, c: 'forbidden', s: 403 };
    await redis.hset(keys.outcomes('acme'), '119', JSON.stringify(old));
    const r = await store.get('acme', 119);
    expect(r?.b).toBe('forbidden');
    expect(r?.cb).toBeUndefined();
    expect(progressOf({ forbidden: 2, transferred: 3, total: 5 })).toEqual({
      done: 3,
      failed: 2,
      waiting: 0,
      cancelled: 0,
      approval: 0,
      total: 5,
    });
  });
});
