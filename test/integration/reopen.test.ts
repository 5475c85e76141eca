// Re-opening finished learners on purpose (retry, reconcile) without racing the workers: the force
// cutoff, and the repair of a learner left queued while its old job sits in BullMQ's failed set.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newRunId } from '../../src/outcomes/runs.ts';
import { enqueueCsv } from '../../src/queue/enqueue-csv.ts';
import { jobIdOf } from '../../src/queue/job.ts';
import { startHarness, type Harness } from '../helpers/pipeline.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ tag: 'reopen', sim: { learners: 60, forbiddenLearnerIds: [5] } });
});
afterAll(async () => {
  await h?.close();
});

describe('re-opening finished learners', () => {
  it('a force cutoff re-opens only records last updated before it', async () => {
    const store = h.ctx.store;
    await store.markQueued([{ org: 'acme', learnerId: 50, runId: 'r1', source: 't', force: false }], 1000);
    await store.recordAttempt(
      'acme',
      50,
      'r1',
      { bucket: 'transferred', code: 'transferred', durationMs: 1, countsAsAttempt: true },
      5000,
    );
    const kept = await store.markQueued(
      [{ org: 'acme', learnerId: 50, runId: 'r2', source: 't', force: 4000 }],
      6000,
    );
    expect(kept[0]).toEqual({ kind: 'kept', bucket: 'transferred' });
    expect((await store.get('acme', 50))?.b).toBe('transferred');
    const reopened = await store.markQueued(
      [{ org: 'acme', learnerId: 50, runId: 'r2', source: 't', force: 5001 }],
      7000,
    );
    expect(reopened[0]).toEqual({ kind: 'reopened', from: 'transferred' });
    const rec = await store.get('acme', 50);
    expect(rec?.b).toBe('queued');
    expect(rec?.a).toBe(1); // the history stays with the learner
  });

  it('running the same file again repairs a learner left queued with its old job in the failed set', async () => {
    const file = h.writeFile('f.csv', 'id\n5\n');
    const runId = newRunId();
    await h.ctx.runs.create({ id: runId, kind: 'csv', source: 'f.csv', orgs: ['acme'] });
    const deps = { producer: h.ctx.producer, runs: h.ctx.runs };
    const opts = {
      file,
      defaultOrg: 'acme',
      knownOrgs: h.config.orgs,
      runId,
      rejectsFile: join(h.dir, 'r.csv'),
    };
    await enqueueCsv(deps, opts);
    await h.workUntilIdle({ concurrency: 1 });
    expect((await h.ctx.store.get('acme', 5))?.b).toBe('forbidden');
    const queue = h.ctx.queues.get('acme');
    expect(await queue.getJobState(jobIdOf(5))).toBe('failed');

    // A re-open whose add never happened (a crash in between): queued, with the failed job still there.
    await h.ctx.store.markQueued([{ org: 'acme', learnerId: 5, runId, source: 't', force: true }]);
    expect((await h.ctx.store.get('acme', 5))?.b).toBe('queued');

    const again = await enqueueCsv(deps, opts);
    expect(again.alreadyQueued).toBe(1);
    expect(await queue.getJobState(jobIdOf(5))).toBe('waiting');
    const calls = h.sim.record.filter((r) => r.learnerId === 5).length;
    await h.workUntilIdle({ concurrency: 1 });
    expect(h.sim.record.filter((r) => r.learnerId === 5).length).toBe(calls + 1);
    expect((await h.ctx.store.get('acme', 5))?.b).toBe('forbidden');
  });
});
