// The cancel of issue 33 under load: a run is cancelled while workers transfer it. From the simulator's
// own request record: no cancelled learner was ever called; none is lost (every learner of the run ends
// transferred, or cancelled, or was reported in flight and then finished with a recorded outcome); and
// status, report and the run's progress count the same cancelled learners.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cancelLearners, type CancelSummary } from '../../src/ops/actions/cancel.ts';
import { writeSplit } from '../../src/ops/views/report.ts';
import { collectStatus } from '../../src/ops/views/status.ts';
import { progressOf } from '../../src/outcomes/run-progress.ts';
import { isSuccessBucket, type Bucket } from '../../src/outcomes/record.ts';
import { startWorkers } from '../../src/worker/run-workers.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';
import { waitForCount } from '../helpers/wait.ts';

let h: Harness;
const IDS = learnersNotIn('acme', 120, 2);

beforeAll(async () => {
  h = await startHarness({
    tag: 'cancel-e2e',
    // Calls that take a while, so some are in flight when the cancel comes.
    sim: { learners: 400, faults: { latencyBeforeMs: [30, 120], latencyAfterMs: [10, 60] } },
  });
});
afterAll(async () => {
  await h?.close();
});

describe('cancel a run while workers run', () => {
  it('calls no cancelled learner, loses none, and every count agrees', async () => {
    const { runId } = await h.enqueueIds(IDS);
    const { ctx, sim } = h;
    const work = startWorkers(ctx, { orgs: ['acme'], concurrency: 6, untilIdle: true, idleCheckMs: 100 });
    // Some transferred already, most still waiting.
    await waitForCount(
      'learners of the run transferred',
      async () => (await ctx.store.runCounts('acme', runId)).transferred ?? 0,
      12,
    );
    let summary: CancelSummary | undefined;
    try {
      summary = await cancelLearners(ctx, { orgs: ['acme'], runId }, 'cli:tester@host');
    } finally {
      await work.done;
    }
    const s = summary;
    expect(s.cancelled).toBeGreaterThan(20);
    expect(s.cancelled).toBeLessThan(IDS.length);
    // Calls take 40-180 ms and six run at once: some are in flight at the cancel.
    expect(s.inFlight.length).toBeGreaterThan(0);

    const records = await ctx.store.getMany('acme', IDS);
    const patches = new Map<number, number>();
    for (const r of sim.record) {
      if (r.method === 'PATCH' && r.learnerId !== undefined)
        patches.set(r.learnerId, (patches.get(r.learnerId) ?? 0) + 1);
    }
    const cancelled = IDS.filter((_, i) => records[i]?.b === 'cancelled');
    const done = IDS.filter((_, i) => isSuccessBucket(records[i]?.b as Bucket));
    // None lost: every learner is done or cancelled; nothing waits, nothing failed.
    expect(cancelled.length + done.length).toBe(IDS.length);
    expect(cancelled.length).toBe(s.cancelled);
    // No cancelled learner was ever called; every done one exactly once.
    expect(cancelled.filter((id) => patches.has(id))).toEqual([]);
    for (const id of done) expect(patches.get(id)).toBe(1);
    // In flight at the cancel: not cancelled, finished, its outcome recorded.
    for (const { learnerId } of s.inFlight) expect(done).toContain(learnerId);
    // The learners done before the cancel are counted so; the sums add up.
    const reasons = Object.fromEntries(s.notCancellable.map((n) => [n.reason, n.count]));
    expect(s.cancelled + s.inFlight.length + (reasons.done ?? 0)).toBeLessThanOrEqual(IDS.length);
    expect(reasons.failed ?? 0).toBe(0);

    // status, report and the run's progress count the same.
    const counts = await ctx.store.runCounts('acme', runId);
    expect(counts.cancelled).toBe(s.cancelled);
    expect(counts.total).toBe(IDS.length);
    expect(progressOf(counts)).toEqual({
      done: done.length,
      failed: 0,
      waiting: 0,
      cancelled: s.cancelled,
      approval: 0,
      total: IDS.length,
    });
    const status = await collectStatus(ctx, ['acme']);
    expect(status.orgs[0]?.learners.cancelled).toBe(s.cancelled);
    expect(status.orgs[0]?.remaining).toBe(0);
    expect(status.orgs[0]?.jobs).toMatchObject({ waiting: 0, active: 0, delayed: 0, prioritized: 0 });
    const split = await writeSplit(ctx.store, { orgs: ['acme'], runId }, `${h.dir}/split`);
    expect(split).toMatchObject({ cancelled: s.cancelled, successes: done.length, failures: 0, pending: 0 });
  }, 90_000);
});
