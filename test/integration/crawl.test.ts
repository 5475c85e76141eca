// crawl against the simulator: filters select exactly the right learners, the target organization is
// skipped, a stopped crawl resumes from its cursor (every page read at most once more, nobody lost),
// and a list that changes mid-crawl loses nobody and offers nobody twice.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LearnerApiClient } from '../../src/api/client.ts';
import { listPageSchema } from '../../src/api/schemas.ts';
import { EXIT } from '../../src/cli/shared.ts';
import { crawl, defaultCrawlId, type CrawlOptions } from '../../src/queue/sources/crawl.ts';
import { checkPageAnswered } from '../../src/queue/sources/page-checks.ts';
import { jobIdOf } from '../../src/queue/job.ts';
import { startHarness, type Harness } from '../helpers/pipeline.ts';
import { runCommand, spawnCli, waitExit } from '../helpers/cli.ts';
import { startPageOneServer } from '../helpers/page-one-server.ts';
import { waitForCount } from '../helpers/wait.ts';

let h: Harness;
const N = 1000;
const ACME = 1;

/**
 * A fresh simulator and key prefix per test: each asserts on its own queue and records, whatever ran
 * before it (a crawl enqueues learners for good, and a learner already queued is not recorded again).
 */
function freshHarness(tag: string) {
  beforeEach(async () => {
    h = await startHarness({ tag, sim: { learners: N }, env: { LOG_LEVEL: 'warn' } });
  });
  afterEach(async () => {
    await h?.close();
  });
}

const deps = () => ({
  redis: h.ctx.redis,
  keys: h.ctx.keys,
  producer: h.ctx.producer,
  runs: h.ctx.runs,
  client: h.ctx.client as NonNullable<typeof h.ctx.client>,
});

function run(options: Partial<CrawlOptions> & Pick<CrawlOptions, 'filters'>) {
  return crawl(deps(), {
    org: 'acme',
    targetOrgId: ACME,
    tokens: ['sim-acme-1'],
    concurrency: 4,
    ...options,
  });
}

/** Learner ids of the simulator's current state that satisfy a predicate, in id order. */
function simIds(
  pred: (l: NonNullable<ReturnType<Harness['sim']['learner']>>) => boolean,
  max = N + 10,
): number[] {
  const out: number[] = [];
  for (let id = 1; id <= max; id++) {
    const l = h.sim.learner(id);
    if (l && pred(l)) out.push(id);
  }
  return out;
}

async function recordedIds(runId: string): Promise<number[]> {
  const out: number[] = [];
  for await (const [id, rec] of h.ctx.store.scan('acme')) if (rec.r === runId) out.push(id);
  return out.sort((a, b) => a - b);
}

function listReads(sinceSeq: number): Map<number, number> {
  const reads = new Map<number, number>();
  for (const r of h.sim.record) {
    if (r.seq > sinceSeq && r.method === 'GET' && r.page !== undefined)
      reads.set(r.page, (reads.get(r.page) ?? 0) + 1);
  }
  return reads;
}

const lastSeq = () => h.sim.record[h.sim.record.length - 1]?.seq ?? 0;

describe('crawl filters', () => {
  freshHarness('crawl-filters');
  it('selects exactly the active beta learners with a user, and never one already in acme', async () => {
    const s = await run({
      filters: { fromOrgId: 2, activeOnly: true, withUserOnly: true },
      crawlId: 'filters',
    });
    const expected = simIds((l) => l.organizationId === 2 && l.isActive === 1 && l.userId !== null);
    expect(expected.length).toBeGreaterThan(200);
    expect(await recordedIds(s.runId)).toEqual(expected);
    expect(s.selected).toBe(expected.length);
    expect(s.enqueued).toBe(expected.length);
    expect(s.seen).toBe(N);
    expect(s.skipped['in-target']).toBe(334);
    expect(s.skipped['other-org']).toBe(333);
    expect(s.skipped.inactive + s.skipped['no-user']).toBe(333 - expected.length);
    const queue = h.ctx.queues.get('acme');
    for (const id of expected.slice(0, 20)) expect(await queue.getJob(jobIdOf(id))).toBeDefined();
    expect(h.sim.record.some((r) => r.method === 'PATCH')).toBe(false);
  });

  it('--limit selects the first N matching learners in list order, exactly, and the run is recorded', async () => {
    const s = await run({ filters: { fromOrgId: 3, limit: 25 }, crawlId: 'limit' });
    const expected = simIds((l) => l.organizationId === 3).slice(0, 25);
    expect(await recordedIds(s.runId)).toEqual(expected);
    expect(s.stoppedByLimit).toBe(true);
    expect(s.lastPage).toBe(10);
    expect(s.requests).toBeLessThan(10);
    const meta = await h.ctx.runs.get(s.runId);
    expect(meta?.kind).toBe('crawl');
    expect(meta?.orgs).toEqual(['acme']);
  });

  it('without filters selects everyone not in the target; a second crawl enqueues nobody again', async () => {
    const s = await run({ filters: {}, crawlId: 'all' });
    const notAcme = simIds((l) => l.organizationId !== ACME);
    expect(s.selected).toBe(notAcme.length);
    expect(s.skipped['in-target']).toBe(334);
    expect(s.enqueued).toBe(notAcme.length);
    expect(s.alreadyQueued).toBe(0);
    const again = await run({ filters: {}, crawlId: 'all' });
    expect(again.runId).not.toBe(s.runId);
    expect(again.enqueued).toBe(0);
    expect(again.alreadyQueued).toBe(notAcme.length);
    const counts = await h.ctx.queues.get('acme').getJobCounts('waiting');
    expect(counts.waiting).toBe(notAcme.length);
  });
});

describe('crawl resume', () => {
  freshHarness('crawl-resume');
  it('resumes at the cursor after an abort: pages before it are not read again, none more than twice', async () => {
    const since = lastSeq();
    const abort = new AbortController();
    const filters = { fromOrgId: 2 };
    const handed: number[] = [];
    await expect(
      run({
        filters,
        crawlId: 'resume',
        // Small batches, so the walk is still under way when page 4 is committed.
        readAhead: 4,
        batchPages: 2,
        signal: abort.signal,
        onPage: (read) => {
          handed.push(read.page);
          if (read.page === 4) abort.abort();
        },
      }),
    ).rejects.toThrow();
    // Pages are handed on a few at a time (read ahead): the cursor stands right after the last one.
    const next = Math.max(...handed) + 1;
    expect(next).toBeGreaterThanOrEqual(5);
    expect(next).toBeLessThanOrEqual(10);
    const cursor = await h.ctx.redis.hget(h.ctx.keys.crawlCursor('acme', 'resume'), 'next');
    expect(Number(cursor)).toBe(next);
    const s = await run({ filters, crawlId: 'resume' });
    expect(s.resumedAt).toBe(next);
    const reads = listReads(since);
    for (let p = 1; p < next; p++) expect(reads.get(p)).toBe(1);
    for (let p = next; p <= 10; p++) expect(reads.get(p)).toBeGreaterThanOrEqual(1);
    for (const n of reads.values()) expect(n).toBeLessThanOrEqual(2);
    expect(await recordedIds(s.runId)).toEqual(simIds((l) => l.organizationId === 2));
    expect(s.selected).toBe(333);
    expect(s.enqueued).toBe(333);
    expect(s.alreadyQueued).toBe(0);
  });

  it('read ahead: a crash between a batch enqueued and its commit resumes with every learner enqueued once', async () => {
    const filters = { fromOrgId: 3 };
    const expected = simIds((l) => l.organizationId === 3);
    let adds = 0;
    let addedByFirst = 0;
    // The second batch reaches the queue, then the process "dies" before the cursor commits it; the
    // batch after it, on its way too, is never committed either.
    const crashing = Object.create(h.ctx.producer) as typeof h.ctx.producer;
    crashing.add = async (items, runId, o) => {
      const counts = await h.ctx.producer.add(items, runId, o);
      addedByFirst += counts.enqueued;
      if (++adds === 2) throw new Error('killed after enqueue, before commit');
      return counts;
    };
    const opts = { filters, crawlId: 'ahead', concurrency: 2, readAhead: 8, batchPages: 3 };
    await expect(
      crawl(
        { ...deps(), producer: crashing },
        { org: 'acme', targetOrgId: ACME, tokens: ['sim-acme-1'], ...opts },
      ),
    ).rejects.toThrow('killed after enqueue');
    const cursorKey = h.ctx.keys.crawlCursor('acme', 'ahead');
    const next = Number(await h.ctx.redis.hget(cursorKey, 'next'));
    const committed = Number(await h.ctx.redis.hget(cursorKey, 'enqueued'));
    expect(next).toBeGreaterThan(1);
    expect(next).toBeLessThan(10);
    expect(addedByFirst).toBeGreaterThan(committed);
    const s = await run(opts);
    expect(s.resumedAt).toBe(next);
    // The same run resumed: every learner of gamma recorded in it.
    expect(await recordedIds(s.runId)).toEqual(expected);
    // Learners enqueued but not committed are offered again: their jobs exist, so they count as already
    // queued and nobody is enqueued twice or missed.
    expect(addedByFirst + (s.enqueued - committed)).toBe(expected.length);
    expect(s.alreadyQueued).toBe(addedByFirst - committed);
    const queue = h.ctx.queues.get('acme');
    expect((await queue.getJobCounts('waiting')).waiting).toBe(expected.length);
    const ids = new Set<number>();
    for await (const [id] of h.ctx.store.scan('acme')) ids.add(id);
    expect([...ids].sort((a, b) => a - b)).toEqual(expected);
  });

  it('resumes after the CLI is killed with SIGKILL mid-crawl, losing nobody', async () => {
    h.sim.setFaults({ latencyBeforeMs: [150, 250] });
    try {
      const since = lastSeq();
      const args = [
        'crawl',
        '--org',
        'acme',
        '--target-org-id',
        '1',
        '--from-org',
        '3',
        '--concurrency',
        '2',
      ];
      const child = spawnCli(args, h.env);
      // The kill must land mid-walk, past a committed page, or the resume below has nothing to resume.
      // Pages read are not enough: a CI run killed after 5 reads with page 1's learners enqueued but its
      // cursor commit not yet made (a crash the crawl rightly answers by walking again from page 1).
      const cursorKey = h.ctx.keys.crawlCursor('acme', defaultCrawlId(1, { fromOrgId: 3 }));
      const committed = async () => Number((await h.ctx.redis.hget(cursorKey, 'next')) ?? 1) - 1;
      await waitForCount('pages the first crawl committed to its cursor', committed, 1);
      expect(await h.ctx.redis.hget(cursorKey, 'status')).toBe('running');
      child.kill('SIGKILL');
      expect((await waitExit(child)).signal).toBe('SIGKILL');
      const second = await runCommand(args, h.env, 60_000);
      expect(second.stderr + second.stdout).toMatch(/resumed at page \d+/);
      expect(second.code).toBe(0);
      const reads = listReads(since);
      expect([...reads.keys()].sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      for (const n of reads.values()) expect(n).toBeLessThanOrEqual(2);
      const runId = /run (\S+): crawl acme/.exec(second.stdout)?.[1] ?? '';
      expect(await recordedIds(runId)).toEqual(simIds((l) => l.organizationId === 3));
    } finally {
      h.sim.setFaults({});
    }
  });
});

describe('a list that changes while it is read', () => {
  freshHarness('crawl-change');
  it('loses nobody and offers nobody twice when learners are removed and inserted mid-crawl', async () => {
    let changed = false;
    let inserted = 0;
    const s = await run({
      filters: { fromOrgId: 2 },
      crawlId: 'changing',
      concurrency: 3,
      // Reads must still be under way when the list changes, for the walk to see the change.
      readAhead: 3,
      onPage: (read) => {
        if (read.pass === 1 && read.page === 3 && !changed) {
          changed = true;
          // Removed from page 1: every later learner moves one position back, so the first learner of
          // each unread page slides onto a page already read.
          h.sim.removeLearner(5);
          h.sim.removeLearner(8);
          // Inserted on page 1, already read: it would be missed without a re-read.
          inserted = h.sim.insertLearner({ position: 10, org: 'beta' });
        }
      },
    });
    expect(changed).toBe(true);
    expect(s.rereads).toBeGreaterThan(0);
    expect(s.unsettledPages).toEqual([]);
    const present = simIds((l) => l.organizationId === 2, N + 5);
    expect(present).toContain(inserted);
    const got = await recordedIds(s.runId);
    // Everyone present at the end is there; the only extras are the two beta learners seen before they were removed.
    expect(got.filter((id) => present.includes(id))).toEqual(present);
    expect(got.filter((id) => !present.includes(id))).toEqual([5, 8]);
    // Nobody offered to the producer twice: every selection was new to the queue.
    expect(s.alreadyQueued).toBe(0);
    expect(s.enqueued).toBe(got.length);
    expect(s.selected).toBe(got.length);
  });
});

describe('a service that ignores ?page=', () => {
  freshHarness('crawl-page-one');
  it('stops the crawl at page 2 with an error naming the page asked and what came back', async () => {
    const server = await startPageOneServer(250);
    const client = new LearnerApiClient({
      baseUrl: server.url,
      userAgent: 'x',
      requestTimeoutMs: 1000,
      connectTimeoutMs: 500,
    });
    try {
      const failed = crawl(
        { ...deps(), client },
        { org: 'acme', targetOrgId: ACME, tokens: ['t'], filters: {}, crawlId: 'page-one', concurrency: 4 },
      );
      await expect(failed).rejects.toMatchObject({
        code: 'LT_INPUT_UNREADABLE',
        message: expect.stringMatching(
          /^listing learners: asked for page [23], the service answered current_page 1, from 1 where page [23] starts at [12]01/,
        ),
      });
      // No loop and no retry: page 1, then the pages after it once each, and nothing more.
      expect(server.asked[0]).toBe('1');
      expect([...server.asked].sort()).toEqual(['1', '2', '3']);
      // Page 1 was handled; the cursor stays before page 2, so a run against a fixed service resumes there.
      const cursor = await h.ctx.redis.hgetall(h.ctx.keys.crawlCursor('acme', 'page-one'));
      expect(cursor.next).toBe('2');

      // Through the CLI: the message on stderr, exit 5 (the list could not be read), no stack.
      const r = await runCommand(['crawl', '--org', 'acme', '--target-org-id', '1', '--quiet'], {
        ...h.env,
        LEARNER_API_BASE_URL: server.url,
      });
      expect(r.code, r.stderr).toBe(EXIT.input);
      expect(r.stderr).toMatch(
        /learner-transfer: listing learners: asked for page [23], the service answered/,
      );
      expect(r.stderr).not.toMatch(/\n\s+at .+:\d+:\d+/);
    } finally {
      await client.close();
      await server.close();
    }
  });

  it('checks current_page (number or string), from, to and the item count against the page asked', () => {
    const body = (page: number, p: Record<string, unknown>, items = 100) =>
      listPageSchema.parse({
        data: Array.from({ length: items }, (_, i) => ({ id: i + 1, organizationId: 1 })),
        pagination: { total: 1000, per_page: 100, last_page: 10, current_page: String(page), ...p },
      });
    const ok = (page: number, p: Record<string, unknown>, items?: number) =>
      expect(() => checkPageAnswered(page, body(page, p, items))).not.toThrow();
    const bad = (page: number, p: Record<string, unknown>, says: string, items?: number) =>
      expect(() => checkPageAnswered(page, body(page, p, items))).toThrow(says);
    ok(3, { from: 201, to: 300 });
    ok(3, { current_page: 3, from: 201, to: 300 });
    ok(10, { from: 901, to: 950 }, 50); // the last page, short
    ok(11, { from: null, to: null }, 0); // past the end: no items, no positions
    ok(3, {}); // from/to absent: the schema accepts it, current_page still decides
    bad(3, { current_page: '1', from: 1, to: 100 }, 'asked for page 3, the service answered current_page 1');
    bad(3, { current_page: 1, from: 201, to: 300 }, 'current_page 1');
    bad(3, { from: 1, to: 100 }, 'from 1 where page 3 starts at 201');
    bad(3, { from: 201, to: 301 }, 'to 301 outside 201..300');
    bad(3, { from: 201, to: 200 }, 'to 200 outside 201..300');
    bad(3, { from: 201, to: 300 }, '101 learners for per_page 100', 101);
  });
});
