// Crawl benchmark (not a test): `node bin/run-ts.js bench/crawl.ts`. Pages per second of the crawl
// against the simulator (no latency), next to a raw loop of undici GETs of the same pages at the same
// concurrency in the same run: the ratio is what the walker, schema validation, selection and (for the
// enqueueing crawl) Redis cost over bare HTTP + JSON.parse.
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
import { createSimulator } from '../src/simulator/index.ts';
import { deleteKeysUnder as deletePrefix } from '../src/redis/client.ts';
import { isMain, printFigures } from './common.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const LEARNERS = Number(process.env.BENCH_CRAWL_LEARNERS ?? 30_000);
const CONCURRENCY = 4;

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

export async function runCrawlBench(): Promise<Figures> {
  const sim = createSimulator({ learners: LEARNERS });
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

    const raw = await rawLoop(url, pages);
    let t = performance.now();
    const dry = await crawl(deps, { ...base, filters: { fromOrgId: 2 }, dryRun: true });
    const dryRate = pages / ((performance.now() - t) / 1000);
    t = performance.now();
    const real = await crawl(deps, { ...base, filters: { fromOrgId: 2 }, crawlId: 'bench' });
    const realRate = pages / ((performance.now() - t) / 1000);
    return {
      'learners / pages': `${LEARNERS} / ${pages}`,
      'concurrency (pages in flight)': CONCURRENCY,
      'raw undici GET + JSON.parse pages/s (baseline)': round(raw),
      'crawl --dry-run pages/s': round(dryRate),
      'crawl --dry-run / raw': round(dryRate / raw, 2),
      'crawl enqueueing pages/s': round(realRate),
      'crawl enqueueing / raw': round(realRate / raw, 2),
      'learners selected / enqueued': `${dry.selectedIds?.length ?? 0} / ${real.enqueued}`,
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
