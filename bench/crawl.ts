// Crawl benchmark (not a test): `node bin/run-ts.js bench/crawl.ts`. Pages per second of the crawl
// against the simulator (no latency, then BENCH_CRAWL_LATENCY_MS per page), next to a raw loop of undici GETs of the same pages at the same
// concurrency in the same run: the ratio is what the walker, schema validation, selection and (for the
// enqueueing crawl) Redis cost over bare HTTP + JSON.parse. The enqueueing crawl reads DEFAULT_READ_AHEAD
// pages ahead and enqueues up to DEFAULT_BATCH_PAGES pages at once (crawl-pages.ts). Each figure is the
// median of BENCH_CRAWL_RUNS runs (default 3; raw, dry run and enqueueing crawl alternated), each
// enqueueing crawl under a key prefix of its own.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { Pool } from 'undici';
import { LearnerApiClient } from '../src/api/client.ts';
import { createKeys } from '../src/core/keys.ts';
import { OutcomeStore } from '../src/outcomes/store.ts';
import { Runs } from '../src/outcomes/runs.ts';
import { Claims } from '../src/claims/claims.ts';
import { Producer } from '../src/queue/producer.ts';
import { QueueSet } from '../src/queue/queues.ts';
import { crawl } from '../src/queue/sources/crawl.ts';
import { MAX_BATCHES_IN_FLIGHT } from '../src/queue/sources/crawl-pages.ts';
import { DEFAULT_BATCH_PAGES, DEFAULT_READ_AHEAD } from '../src/queue/sources/page-walker.ts';
import { createSimulator } from '../src/simulator/index.ts';
import { deleteKeysUnder as deletePrefix } from '../src/redis/client.ts';
import { isMain, median, printFigures } from './common.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const LEARNERS = Number(process.env.BENCH_CRAWL_LEARNERS ?? 30_000);
const CONCURRENCY = 4;
const RUNS = Number(process.env.BENCH_CRAWL_RUNS ?? 3);

type Figures = Record<string, number | string>;
const round = (n: number, d = 1) => Math.round(n * 10 ** d) / 10 ** d;

async function rawLoop(url: string, pages: number): Promise<number> {
  const origin = new URL(url).origin;
  const pool = new Pool(origin, { connections: CONCURRENCY, pipelining: 1 });
  let next = 1;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next <= pages) {
        const page = next++;
        const res = await pool.request({
          method: 'GET',
          path: `/1/learner?page=${page}`,
          headers: { 'user-agent': 'bench', accept: 'application/json', authorization: 'Bearer sim-acme-1' },
        });
        JSON.parse(await res.body.text());
      }
    }),
  );
  const s = (performance.now() - start) / 1000;
  await pool.close();
  return pages / s;
}

/**
 * The same learners through the producer alone, in batches the size of the crawl's (16 pages of
 * selected learners), two on their way at once: the most an enqueueing crawl could reach here.
 */
async function enqueueAlone(redis: Redis, prefix: string, ids: readonly number[], perPage: number) {
  const keys = createKeys(prefix);
  const queues = new QueueSet(redis, keys, { attempts: 3, backoffMs: 1000 });
  const producer = new Producer(queues, new OutcomeStore(redis, keys), new Claims(redis, keys), keys);
  const size = Math.max(1, Math.round(perPage * DEFAULT_BATCH_PAGES));
  const start = performance.now();
  const pending: Promise<unknown>[] = [];
  for (let i = 0; i < ids.length; i += size) {
    const items = ids.slice(i, i + size).map((learnerId) => ({ org: 'acme', learnerId, source: 'bench' }));
    pending.push(producer.add(items, 'bench'));
    if (pending.length >= MAX_BATCHES_IN_FLIGHT) await pending.shift();
  }
  await Promise.all(pending);
  const s = (performance.now() - start) / 1000;
  await queues.close();
  await deletePrefix(redis, prefix);
  return s;
}

/**
 * Both settings: the simulator answering at once (the machine's own cost: CPU-bound), and each page
 * answered after BENCH_CRAWL_LATENCY_MS (default 50 ms, a service across a network), where reading ahead
 * hides the waits that enqueueing page by page added.
 */
export async function runCrawlBench(): Promise<Figures> {
  const latency = Number(process.env.BENCH_CRAWL_LATENCY_MS ?? 50);
  if (!Number.isFinite(latency) || latency < 0) throw new Error('BENCH_CRAWL_LATENCY_MS: expected ms >= 0');
  const figures: Figures = { ...(await measureCrawl(0)) };
  if (latency > 0) {
    for (const [k, v] of Object.entries(await measureCrawl(latency))) {
      if (k.startsWith('crawl') || k.startsWith('raw') || k.startsWith('producer'))
        figures[`${latency} ms per page: ${k}`] = v;
    }
  }
  return figures;
}

/** Crawl deps under a prefix of their own, for a crawl whose learners nothing has queued yet. */
function freshDeps<D extends { redis: Redis }>(deps: D, prefix: string) {
  const { redis } = deps;
  const runKeys = createKeys(prefix);
  const runQueues = new QueueSet(redis, runKeys, { attempts: 3, backoffMs: 1000 });
  const runDeps = {
    ...deps,
    keys: runKeys,
    producer: new Producer(runQueues, new OutcomeStore(redis, runKeys), new Claims(redis, runKeys), runKeys),
    runs: new Runs(redis, runKeys),
  };
  return { runDeps, runQueues };
}

async function measureCrawl(latencyMs: number): Promise<Figures> {
  const sim = createSimulator({
    learners: LEARNERS,
    ...(latencyMs > 0 ? { faults: { latencyBeforeMs: [latencyMs, latencyMs] } } : {}),
  });
  const url = await sim.listen();
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const prefix = `lt-bench-crawl-${randomBytes(3).toString('hex')}`;
  const keys = createKeys(prefix);
  const store = new OutcomeStore(redis, keys);
  const queues = new QueueSet(redis, keys, { attempts: 3, backoffMs: 1000 });
  const client = new LearnerApiClient({
    baseUrl: url,
    userAgent: 'bench',
    requestTimeoutMs: 10_000,
    connectTimeoutMs: 2_000,
    connections: CONCURRENCY,
  });
  const pages = Math.ceil(LEARNERS / 100);
  const deps = {
    redis,
    keys,
    producer: new Producer(queues, store, new Claims(redis, keys), keys),
    runs: new Runs(redis, keys),
    client,
  };
  const base = { org: 'acme', targetOrgId: 1, tokens: ['sim-acme-1'], concurrency: CONCURRENCY };
  try {
    // Warm both paths (JIT, sockets) before measuring.
    await rawLoop(url, 20);
    await crawl(deps, { ...base, filters: { limit: 1 }, dryRun: true });

    const raws: number[] = [];
    const dryRates: number[] = [];
    const realRates: number[] = [];
    const aloneRates: number[] = [];
    let selected = 0;
    let enqueued = 0;
    for (let i = 0; i < RUNS; i++) {
      raws.push(await rawLoop(url, pages));
      let t = performance.now();
      const dry = await crawl(deps, { ...base, filters: { fromOrgId: 2 }, dryRun: true });
      dryRates.push(pages / ((performance.now() - t) / 1000));
      // A fresh prefix per run: a crawl whose learners are queued already would add nothing.
      const { runDeps, runQueues } = freshDeps(deps, `${prefix}-${i}`);
      t = performance.now();
      const real = await crawl(runDeps, { ...base, filters: { fromOrgId: 2 }, crawlId: 'bench' });
      realRates.push(pages / ((performance.now() - t) / 1000));
      selected = dry.selectedIds?.length ?? 0;
      enqueued = real.enqueued;
      await runQueues.close();
      await deletePrefix(redis, `${prefix}-${i}`);
      const ids = dry.selectedIds ?? [];
      aloneRates.push(pages / (await enqueueAlone(redis, `${prefix}-alone-${i}`, ids, ids.length / pages)));
    }
    const raw = median(raws);
    const ratios = realRates.map((r, i) => r / (raws[i] as number));
    return {
      'learners / pages': `${LEARNERS} / ${pages}`,
      'concurrency (pages in flight)': CONCURRENCY,
      'read-ahead pages / pages per batch / batches in flight': `${DEFAULT_READ_AHEAD} / ${DEFAULT_BATCH_PAGES} / ${MAX_BATCHES_IN_FLIGHT}`,
      'runs (medians below)': RUNS,
      'raw undici GET + JSON.parse pages/s (baseline)': round(raw),
      'crawl --dry-run pages/s': round(median(dryRates)),
      'crawl --dry-run / raw': round(median(dryRates.map((r, i) => r / (raws[i] as number))), 2),
      'crawl enqueueing pages/s': round(median(realRates)),
      'crawl enqueueing / raw': round(median(ratios), 2),
      'crawl enqueueing / raw, each run': ratios.map((r) => round(r, 2)).join(', '),
      'producer alone, same learners and batches, pages/s': round(median(aloneRates)),
      'producer alone / raw (the ceiling of crawl enqueueing / raw)': round(
        median(aloneRates.map((r, i) => r / (raws[i] as number))),
        2,
      ),
      'learners selected / enqueued': `${selected} / ${enqueued}`,
    };
  } finally {
    await queues.close();
    await client.close();
    await deletePrefix(redis, prefix);
    await redis.quit();
    await sim.close();
  }
}

if (isMain(import.meta.url))
  printFigures('crawl benchmark (same simulator, same run)', await runCrawlBench());
