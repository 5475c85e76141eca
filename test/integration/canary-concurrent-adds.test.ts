// A canary holds when a run's learners are added by several calls at once (a crawl's batches overlap:
// queue/sources/crawl-pages.ts). The canary's places used to be counted by a read before the marks were
// written, so two adds to one run both read an empty run and each took the whole canary: a crawl with
// --canary 4 stopped with 8 learners queued (seen in CI). Real Redis, simulator.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ProducerItem } from '../../src/queue/producer.ts';
import { startHarness, type Harness } from '../helpers/pipeline.ts';

let h: Harness;
beforeEach(async () => {
  h = await startHarness({ tag: 'canary-adds', env: { LOG_LEVEL: 'warn' } });
});
afterEach(async () => {
  await h?.close();
});

const items = (org: string, from: number, n: number): ProducerItem[] =>
  Array.from({ length: n }, (_, i) => ({ org, learnerId: from + i, source: 'batches.csv' }));

describe('a canary run added to by several calls at once', () => {
  it('queues exactly the canary per organization, the rest awaiting approval', async () => {
    const producer = h.ctx.producer.withDefaults({ canary: 4 });
    const runId = 'run-canary-adds';
    const adds = await Promise.all([
      producer.add(items('acme', 1000, 10), runId),
      producer.add(items('acme', 2000, 10), runId),
      producer.add(items('acme', 3000, 10), runId),
      producer.add([...items('beta', 4000, 5), ...items('acme', 5000, 2)], runId),
    ]);
    expect(adds.reduce((n, c) => n + c.enqueued, 0)).toBe(8);
    expect(adds.reduce((n, c) => n + c.awaitingApproval, 0)).toBe(37 - 8);
    expect(await h.ctx.store.runCounts('acme', runId)).toEqual({
      total: 32,
      queued: 4,
      'awaiting-approval': 28,
    });
    expect(await h.ctx.store.runCounts('beta', runId)).toEqual({
      total: 5,
      queued: 4,
      'awaiting-approval': 1,
    });
    expect(await h.ctx.queues.get('acme').count()).toBe(4);
    expect(await h.ctx.queues.get('beta').count()).toBe(4);
    // A later add to the same run finds the canary spent: all of it awaits approval.
    const later = await producer.add(items('acme', 6000, 3), runId);
    expect(later).toMatchObject({ enqueued: 0, awaitingApproval: 3 });
  });
});
