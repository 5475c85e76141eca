// A job that BullMQ fails on its own (an error inside the worker, not an answer of the service) must not
// leave its learner `queued` with no job: it ends `worker-error`, visible, and a retry finishes it.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { retryFailed } from '../../src/ops/actions/retry.ts';
import { startWorkers } from '../../src/worker/run-workers.ts';
import { startHarness, type Harness } from '../helpers/pipeline.ts';

let h: Harness;
// A harness per test: a test that replaces the claim check, or moves a learner, does so for itself only.
beforeEach(async () => {
  h = await startHarness({ tag: 'werr', sim: { learners: 30, repeatMode: 'error' }, env: { ATTEMPTS: '1' } });
});
afterEach(async () => {
  await h?.close();
});

describe('a job failed by the worker itself', () => {
  it('ends worker-error, is counted as a failure, and a retry completes it', async () => {
    await h.enqueueIds([2, 3]);
    // The claim check throws inside the worker: an error the outcome table does not know (a bug).
    const claim = h.ctx.claims.claim.bind(h.ctx.claims);
    h.ctx.claims.claim = async () => {
      throw new Error('internal error in the claim check');
    };
    const first = await h.workUntilIdle();
    expect(first.reason).toBe('idle');
    expect(first.failed).toBe(2);
    for (const id of [2, 3]) {
      const r = await h.ctx.store.get('acme', id);
      expect(r?.b).toBe('worker-error');
      expect(r?.m).toMatch(/internal error in the claim check/);
      // Nothing was sent, and the permit and the lease went back.
      expect(h.sim.ownerChanges(id)).toBe(0);
      expect(await h.ctx.redis.hget(h.ctx.keys.lease('acme'), String(id))).toBeNull();
    }
    expect(await h.ctx.store.bucketSize('acme', 'worker-error')).toBe(2);

    h.ctx.claims.claim = claim;
    expect((await retryFailed(h.ctx, { orgs: ['acme'], status: 'worker-error' })).requeued).toBe(2);
    const second = await h.workUntilIdle();
    expect(second.failed).toBe(0);
    for (const id of [2, 3]) {
      expect((await h.ctx.store.get('acme', id))?.b).toBe('transferred');
      expect(h.sim.ownerChanges(id)).toBe(1);
    }
  });

  it('a job whose learner is already done completes without calling the service', async () => {
    await h.enqueueIds([2]);
    expect((await h.workUntilIdle()).failed).toBe(0);
    expect((await h.ctx.store.get('acme', 2))?.b).toBe('transferred');
    const before = h.sim.record.length;
    await h.ctx.queues
      .get('acme')
      .add('transfer', { org: 'acme', learnerId: 2, runId: 'dup', source: 'test' }, { jobId: 'dup-2' });
    const r = await startWorkers(h.ctx, { orgs: ['acme'], concurrency: 1, untilIdle: true, idleCheckMs: 100 })
      .done;
    expect(r.reason).toBe('idle');
    expect(h.sim.record.length).toBe(before);
    expect((await h.ctx.store.get('acme', 2))?.b).toBe('transferred');
  });

  it('a cut 200 leaves what arrived of its body in the audit stream', async () => {
    h.sim.setFaults({ truncateRate: 1 });
    try {
      await h.enqueueIds([8]);
      await h.workUntilIdle({ concurrency: 1 });
    } finally {
      h.sim.setFaults({});
    }
    const rec = (await h.ctx.store.getWithStory('acme', 8))?.record;
    expect(rec?.b).toBe('bad-response');
    expect(h.sim.ownerChanges(8)).toBe(1);
    const [entry] = await h.ctx.store.auditEntries('acme', rec?.au ?? []);
    const kept = entry?.result as { unreadable: boolean; body: string; reason: string };
    expect(entry?.kind).toBe('unreadable');
    expect(entry?.raw).toBe(kept.body);
    expect(kept.unreadable).toBe(true);
    expect(kept.body.length).toBeGreaterThan(10);
    expect(kept.body.startsWith('{"success":true')).toBe(true);
    expect(kept.reason).toMatch(/cut while reading the body/);
  });
});
