// The lanes: which organizations have work and when (LanesDue, on a real Redis), and a `work` that lets an
// organization go when its budget is spent and takes it again when its next permit frees, not before.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKeys } from '../../src/core/keys.ts';
import { LanesDue } from '../../src/queue/lanes-due.ts';
import { newRunId } from '../../src/outcomes/runs.ts';
import { startWorkers } from '../../src/worker/run-workers.ts';
import type { LaneEvent } from '../../src/worker/lanes.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';
import { deletePrefix, newRedis, randomPrefix } from '../helpers/redis.ts';

describe('LanesDue', () => {
  const redis = newRedis();
  const prefix = randomPrefix('lanes');
  const keys = createKeys(prefix);
  const due = new LanesDue(redis, keys);
  afterAll(async () => {
    await deletePrefix(redis, prefix);
    redis.disconnect();
  });

  it('a mark lowers a time and never raises it; a wake moves only lanes that have one', async () => {
    await due.markDue(['a'], 5_000);
    await due.markDue(['a'], 9_000);
    await due.markDue(['b'], 7_000);
    await due.wake(['c'], 1_000);
    expect((await due.head(10)).map((t) => [t.lane, t.at])).toEqual([
      ['a', 5_000],
      ['b', 7_000],
    ]);
    await due.wake(['b'], 2_000);
    expect((await due.timesOf(['a', 'b', 'c'])).map((t) => t?.at)).toEqual([5_000, 2_000, undefined]);
  });

  it('a swap moves a lane only from the time it read: a mark made meanwhile is kept', async () => {
    await due.markDue(['x'], 1_000);
    const [seen] = await due.timesOf(['x']);
    // Two processes read the same due lane: one takes it under its lease, the other's swap does nothing.
    expect(await due.swap([{ lane: 'x', seen: seen?.raw ?? '', next: 60_000 }])).toEqual([true]);
    expect(await due.swap([{ lane: 'x', seen: seen?.raw ?? '', next: 70_000 }])).toEqual([false]);
    // A producer marks it while it is held; the holder's release (from its lease time) leaves the mark.
    await due.markDue(['x'], 2_000);
    expect(await due.swap([{ lane: 'x', seen: '60000', next: null }])).toEqual([false]);
    expect((await due.timesOf(['x']))[0]?.at).toBe(2_000);
    // Unmarked, the holder's release removes it.
    const [now] = await due.timesOf(['x']);
    expect(await due.swap([{ lane: 'x', seen: now?.raw ?? '', next: null }])).toEqual([true]);
    expect(await due.timesOf(['x'])).toEqual([undefined]);
  });
});

describe('a spent organization', () => {
  let h: Harness;
  beforeAll(async () => {
    // 3 permits per 2 s for the organization (one token at 3/2s as well): 7 learners take three windows.
    h = await startHarness({
      tag: 'lanes-budget',
      env: { LEARNER_API_TOKENS: 'acme:sim-acme-1', LIMIT_PER_TOKEN: '3/2s', LIMIT_PER_ORG: '3/2s' },
    });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('is let go when its budget is spent and taken again when its next permit frees, not before', async () => {
    const ids = learnersNotIn('acme', 7);
    const runId = newRunId();
    await h.ctx.runs.create({ id: runId, kind: 'csv', source: 'spent.csv', orgs: ['acme'] });
    await h.ctx.producer.add(
      ids.map((learnerId) => ({ org: 'acme', learnerId, source: 'spent.csv' })),
      runId,
    );
    const events: (LaneEvent & { t: number })[] = [];
    const result = await startWorkers(h.ctx, {
      orgs: ['acme'],
      concurrency: 3,
      untilIdle: true,
      idleCheckMs: 100,
      lanes: { onChange: (e) => events.push({ ...e, t: Date.now() }) },
    }).done;
    expect(result).toMatchObject({ reason: 'idle', succeeded: 7, failed: 0 });
    const budget = events.filter((e) => e.kind === 'detach' && e.reason === 'budget');
    // Two waits for budget (after 3 and after 6), each woken once: 3 attaches in all, not a poll.
    expect(budget).toHaveLength(2);
    expect(events.filter((e) => e.kind === 'attach')).toHaveLength(3);
    for (const d of budget) {
      const next = events.find((e) => e.kind === 'attach' && e.t > d.t);
      expect(d.dueAt).toBeGreaterThan(d.t);
      // Taken again at the time it was let go for (a timer may fire a few ms early: 20 ms of slack).
      expect(next?.t).toBeGreaterThanOrEqual((d.dueAt as number) - 20);
    }
    expect(h.sim.record.filter((r) => r.status === 429)).toEqual([]);
    expect(h.sim.violations()).toEqual([]);
  });
});
