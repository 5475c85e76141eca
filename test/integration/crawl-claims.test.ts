// A crawl that a lying service cannot hold. The walk believes nothing that does not
// hold together: a last_page that is not ceil(total / per_page), an empty page inside the claimed total,
// a list longer than CRAWL_MAX_PAGES. Each stops the crawl at once with an error naming the claim (exit 5
// from the CLI), keeps what was enqueued, and leaves a cursor of a few fields however many pages were
// claimed. Against real HTTP servers (test/helpers/list-server.ts), with a guard that aborts a walk past
// 300 requests so that code which believes the service fails fast instead of walking for ever.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LearnerApiClient, type ListResult } from '../../src/api/client.ts';
import { listPageSchema } from '../../src/api/schemas.ts';
import { EXIT } from '../../src/cli/shared.ts';
import { crawl, type CrawlOptions } from '../../src/queue/sources/crawl.ts';
import { decodeMarks } from '../../src/queue/sources/page-marks.ts';
import { PageWalker } from '../../src/queue/sources/page-walker.ts';
import { runCommand, withoutNoPersistenceWarning } from '../helpers/cli.ts';
import { listLearner, startListServer, type ListServer } from '../helpers/list-server.ts';
import { startHarness, type Harness } from '../helpers/pipeline.ts';

let h: Harness;
const GUARD = 300;

beforeAll(async () => {
  h = await startHarness({ tag: 'crawl-claims', sim: { learners: 10 }, env: { LOG_LEVEL: 'warn' } });
});
afterAll(async () => {
  await h?.close();
});

/** A page of `learners` as the spec shapes it, claiming `total` (last_page as given, or the true one). */
function page(n: number, learners: unknown[], total: number, lastPage = Math.max(1, Math.ceil(total / 100))) {
  return {
    data: learners,
    pagination: {
      total,
      per_page: 100,
      current_page: String(n),
      last_page: lastPage,
      from: learners.length ? (n - 1) * 100 + 1 : null,
      to: learners.length ? (n - 1) * 100 + learners.length : null,
    },
  };
}

/** 100 learners of organization 2 for page n (ids base+(n-1)*100+1 ..: each test its own). */
const hundred = (n: number, base = 0) =>
  Array.from({ length: 100 }, (_, i) => listLearner(base + (n - 1) * 100 + i + 1, 2));

/**
 * Crawls a server that answers with `answer`, aborted once it has been asked more than GUARD pages.
 * Returns the rejection (or the summary), the pages asked, and the cursor as it is left.
 */
async function crawlAgainst(
  crawlId: string,
  answer: (page: number) => unknown,
  options: Partial<CrawlOptions> = {},
) {
  const guard = new AbortController();
  let server: ListServer | undefined;
  server = await startListServer((n, asked) => {
    if (asked > GUARD) guard.abort(new Error(`the walk asked for more than ${GUARD} pages`));
    return answer(n);
  });
  const client = new LearnerApiClient({
    baseUrl: server.url,
    userAgent: 'x',
    requestTimeoutMs: 2000,
    connectTimeoutMs: 500,
  });
  const waitingBefore = (await h.ctx.queues.get('acme').getJobCounts('waiting')).waiting ?? 0;
  try {
    const outcome = await crawl(
      {
        redis: h.ctx.redis,
        keys: h.ctx.keys,
        producer: h.ctx.producer,
        runs: h.ctx.runs,
        client,
      },
      {
        org: 'acme',
        targetOrgId: 1,
        tokens: ['t'],
        filters: {},
        crawlId,
        concurrency: 4,
        signal: guard.signal,
        ...options,
      },
    ).then(
      (summary) => ({ summary, error: undefined }),
      (error: unknown) => ({ summary: undefined, error: error as Error & { code?: string } }),
    );
    const key = h.ctx.keys.crawlCursor('acme', crawlId);
    const cursor = await h.ctx.redis.hgetall(key);
    const bytes = Number(await h.ctx.redis.call('MEMORY', 'USAGE', key));
    const waiting = (await h.ctx.queues.get('acme').getJobCounts('waiting')).waiting ?? 0;
    return { ...outcome, asked: [...server.asked], cursor, bytes, enqueued: waiting - waitingBefore };
  } finally {
    await client.close();
    await server.close();
    server = undefined;
  }
}

/** The cursor stays a handful of short fields, whatever the service claimed. */
function expectSmallCursor(c: { cursor: Record<string, string>; bytes: number }) {
  expect(Object.keys(c.cursor).filter((f) => f.startsWith('p:'))).toEqual([]);
  expect(Object.keys(c.cursor).length).toBeLessThanOrEqual(20);
  expect(c.bytes).toBeLessThan(2048);
}

describe('a service that claims pages it cannot have', () => {
  it('every page empty, total 0, last_page 1000000000: refused at page 1, one request', async () => {
    const r = await crawlAgainst('liar', (n) => page(n, [], 0, 1_000_000_000));
    expect(r.error?.message).toMatch(
      /^listing learners, page 1: the service claims last_page 1000000000, where total \/ per_page makes 1 page \(total 0, per_page 100, last_page 1000000000\)/,
    );
    expect(r.error?.code).toBe('LT_INPUT_UNREADABLE');
    expect(r.asked).toEqual([1]);
    expect(r.enqueued).toBe(0);
    expect(r.cursor.next).toBe('1');
    expectSmallCursor(r);
  });

  it('an empty page inside the claimed total: stops there, the pages before it stay enqueued', async () => {
    // 1,000 learners claimed (10 pages), page 4 empty.
    const r = await crawlAgainst('hole', (n) => page(n, n === 4 ? [] : hundred(n, 100_000), 1000));
    expect(r.error?.message).toMatch(
      /^listing learners, page 4: the page is empty, but the service claims 1000 learners, 301 and on from this page/,
    );
    expect(r.error?.message).toMatch(
      /3 pages handled, 300 learners enqueued and kept; the same command resumes at page 4/,
    );
    expect(r.summary).toBeUndefined();
    // Page 4 and at most `concurrency` pages read ahead of it; never the rest of the claimed list.
    expect(Math.max(...r.asked)).toBeLessThanOrEqual(8);
    expect(r.asked.length).toBeLessThanOrEqual(8);
    expect(r.enqueued).toBe(300);
    expect(r.cursor.next).toBe('4');
    expect(r.cursor.status).toBe('running');
    expectSmallCursor(r);
  });

  it('a list that grows by a page with every page read stops at maxPages; what was read stays enqueued', async () => {
    // Each page claims one page more than itself: consistent, and never ending.
    const r = await crawlAgainst('growing', (n) => page(n, hundred(n, 200_000), (n + 1) * 100), {
      maxPages: 20,
    });
    expect(r.error?.message).toMatch(
      /^listing learners, page 20: the service claims 21 pages, more than CRAWL_MAX_PAGES \(20\) \(total 2100, per_page 100, last_page 21\): raise CRAWL_MAX_PAGES/,
    );
    expect(r.error?.message).toMatch(/19 pages handled, 1900 learners enqueued and kept/);
    expect([...r.asked].sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    expect(r.enqueued).toBe(1900);
    expect(r.cursor.next).toBe('20');
    expectSmallCursor(r);
  });

  it('through the CLI: exit 5, the claim on stderr, CRAWL_MAX_PAGES from the environment', async () => {
    const liar = await startListServer((n) => page(n, [], 0, 1_000_000_000));
    const growing = await startListServer((n) => page(n, hundred(n), (n + 1) * 100));
    try {
      const args = ['crawl', '--org', 'acme', '--target-org-id', '1', '--quiet'];
      const a = await runCommand(args, { ...h.env, LEARNER_API_BASE_URL: liar.url });
      const aErr = withoutNoPersistenceWarning(a.stderr);
      expect(a.code, aErr).toBe(EXIT.input);
      expect(aErr).toMatch(
        /learner-transfer: listing learners, page 1: the service claims last_page 1000000000/,
      );
      expect(aErr).not.toMatch(/\n\s+at .+:\d+:\d+/);
      expect(liar.asked).toEqual([1]);

      const b = await runCommand([...args, '--crawl-id', 'cli-growing'], {
        ...h.env,
        LEARNER_API_BASE_URL: growing.url,
        CRAWL_MAX_PAGES: '5',
      });
      const bErr = withoutNoPersistenceWarning(b.stderr);
      expect(b.code, bErr).toBe(EXIT.input);
      expect(bErr).toMatch(/page 5: the service claims 6 pages, more than CRAWL_MAX_PAGES \(5\)/);
      expect(Math.max(...growing.asked)).toBe(5);

      const bad = await runCommand(args, {
        ...h.env,
        LEARNER_API_BASE_URL: liar.url,
        CRAWL_MAX_PAGES: 'lots',
      });
      expect(bad.code).toBe(EXIT.config);
      expect(bad.stderr).toMatch(/CRAWL_MAX_PAGES: expected a whole number from 1 to \d+, got 'lots'/);
    } finally {
      await liar.close();
      await growing.close();
    }
  });
});

describe('what the walk remembers', () => {
  it('after 1,000 pages of a list that changed once, the marks are a few ranges, not a field per page', async () => {
    const pages = 1000;
    let total = pages * 100;
    const reader = {
      async listLearners(n: number): Promise<ListResult> {
        // The list grows by one learner when page 500 is read: the pages before it become suspects.
        if (n === 500) total += 1;
        const count = Math.min(100, total - (n - 1) * 100);
        const learners = Array.from({ length: Math.max(0, count) }, (_, i) =>
          listLearner((n - 1) * 100 + i + 1, 2),
        );
        return { ok: true, page: listPageSchema.parse(page(n, learners, total)), durationMs: 1 };
      },
    };
    let mostRanges = 0;
    let handled = 0;
    const concurrency = 8;
    const walker = new PageWalker({
      client: reader,
      tokens: ['t'],
      concurrency,
      maxPasses: 2,
      onPage: (read) => {
        handled++;
        const m = decodeMarks(read.marks);
        if (!m) throw new Error(`marks that do not decode: ${read.marks}`);
        mostRanges = Math.max(mostRanges, m.read.ranges.length, m.fresh.ranges.length);
      },
    });
    const result = await walker.walk();
    // Pass 1 to page 1,001, then the pages read before the change read again.
    expect(result.pass1Pages).toBe(pages + 1);
    expect(result.rereads).toBeGreaterThanOrEqual(490);
    expect(handled).toBe(result.pass1Pages + result.rereads);
    // Pages are read in order, at most `concurrency` at a time: a set of pages has a hole only where a
    // page is still in flight, so at most concurrency + 1 ranges, whatever the number of pages read.
    expect(mostRanges).toBeLessThanOrEqual(concurrency + 1);
  });

  it('a cursor an earlier release wrote (a field per page) resumes, and its page fields are gone', async () => {
    const crawlId = 'legacy';
    const key = h.ctx.keys.crawlCursor('acme', crawlId);
    const filters = JSON.stringify({ targetOrgId: 1 });
    await h.ctx.redis.hset(key, {
      runId: '20261122T020724-abcd',
      status: 'running',
      filters,
      next: 3,
      seq: 2,
      'p:1': '300:1',
      'p:2': '300:2',
    });
    const r = await crawlAgainst(crawlId, (n) => page(n, hundred(n, 300_000), 300));
    expect(r.error).toBeUndefined();
    expect(r.summary?.resumedAt).toBe(3);
    expect(r.asked).toEqual([3]);
    expect(r.summary?.selected).toBe(100);
    expect(r.enqueued).toBe(100);
    expect(r.cursor.status).toBe('done');
    expect(r.cursor.marks).toBe('t=300;c=0;s=3;r=1-3;f=1-3');
    expectSmallCursor(r);
  });
});
