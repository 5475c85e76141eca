// A stopped crawl resumes in its own run (docs/canary.md), so it keeps that run's canary: --canary given
// to the resume of a crawl started without it (which would leave learners awaiting approval in a run that
// `approve` refuses) and a canary crawl resumed without --canary (which would send the rest unapproved)
// are refused with what to give; resumed alike, the canary holds across the stop. Real Redis, simulator.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { approveRun } from '../../src/ops/actions/canary.ts';
import type { CanaryMeta } from '../../src/outcomes/runs.ts';
import { crawl, type CrawlOptions } from '../../src/queue/sources/crawl.ts';
import { startHarness, type Harness } from '../helpers/pipeline.ts';

let h: Harness;
beforeEach(async () => {
  h = await startHarness({ tag: 'crawl-canary', sim: { learners: 1000 }, env: { LOG_LEVEL: 'warn' } });
});
afterEach(async () => {
  await h?.close();
});

const canaryOf = (size: number): CanaryMeta => ({ size, autoApprove: false, approved: {}, refused: {} });

function run(options: Partial<CrawlOptions> = {}) {
  const producer = options.canary
    ? h.ctx.producer.withDefaults({ canary: options.canary.size })
    : h.ctx.producer;
  return crawl(
    {
      redis: h.ctx.redis,
      keys: h.ctx.keys,
      producer,
      runs: h.ctx.runs,
      client: h.ctx.client as NonNullable<typeof h.ctx.client>,
    },
    {
      org: 'acme',
      targetOrgId: 1,
      tokens: ['sim-acme-1'],
      concurrency: 4,
      filters: { fromOrgId: 2 },
      crawlId: 'canary-resume',
      ...options,
    },
  );
}

/** A crawl stopped after its 4th page: unfinished, its cursor and run kept. */
async function stopped(canary?: CanaryMeta): Promise<string> {
  const abort = new AbortController();
  let runId = '';
  await expect(
    run({
      readAhead: 4,
      batchPages: 2,
      signal: abort.signal,
      ...(canary ? { canary } : {}),
      onPage: (read) => {
        if (read.page === 4) abort.abort();
      },
    }),
  ).rejects.toThrow();
  runId = (await h.ctx.redis.hget(h.ctx.keys.crawlCursor('acme', 'canary-resume'), 'runId')) ?? '';
  expect(runId).not.toBe('');
  return runId;
}

describe('a stopped crawl resumed', () => {
  it('with --canary, when it was started without: refused, nothing of the run awaits approval', async () => {
    const runId = await stopped();
    const before = await h.ctx.store.runCounts('acme', runId);
    await expect(run({ canary: canaryOf(4) })).rejects.toThrow(
      `crawl 'canary-resume' of acme is unfinished in run ${runId}, started without --canary: ` +
        'to resume it, leave out --canary; or --restart to start over',
    );
    expect(await h.ctx.store.runCounts('acme', runId)).toEqual(before);
    expect(before['awaiting-approval'] ?? 0).toBe(0);
    const s = await run();
    expect(s.runId).toBe(runId);
    expect(s.resumedAt).toBeGreaterThan(1);
  });

  it('without --canary, when it was started with one: refused; with it, the canary holds across the stop', async () => {
    const runId = await stopped(canaryOf(4));
    const atStop = await h.ctx.store.runCounts('acme', runId);
    expect(atStop.queued).toBe(4);
    await expect(run()).rejects.toThrow(
      `crawl 'canary-resume' of acme is unfinished in run ${runId}, started with --canary 4: ` +
        'to resume it, give --canary 4; or --restart to start over',
    );
    await expect(run({ canary: canaryOf(5) })).rejects.toThrow('give --canary 4');
    expect(await h.ctx.store.runCounts('acme', runId)).toEqual(atStop);

    const s = await run({ canary: canaryOf(4) });
    expect(s.runId).toBe(runId);
    const counts = await h.ctx.store.runCounts('acme', runId);
    // Every learner of organization 2 (beta) selected; 4 sent, the others await approval.
    const selected = [...Array(1000).keys()].filter((i) => i % 3 === 1).length;
    expect(counts).toMatchObject({ total: selected, queued: 4, 'awaiting-approval': selected - 4 });
    const approved = await approveRun(h.ctx, runId, 'test:approver');
    expect(approved.released).toBe(selected - 4);
  });
});
