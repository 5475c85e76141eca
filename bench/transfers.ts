// Unconstrained transfer throughput: N learners through the whole pipeline (limiter, client, outcome
// store, audit, BullMQ) with the limits lifted and a simulator without latency, against a raw undici
// loop of the same PATCH requests on the same simulator with the same concurrency, in the same run.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { Pool } from 'undici';
import { Redis } from 'ioredis';
import { createContext } from '../src/app/context.ts';
import { loadConfig } from '../src/core/config.ts';
import { createLogger } from '../src/core/log.ts';
import { enqueueCsv } from '../src/queue/enqueue-csv.ts';
import { createSimulator } from '../src/simulator/index.ts';
import { startWorkers } from '../src/worker/run-workers.ts';
import { isMain, printFigures, round, type Figures } from './common.ts';
import { deleteKeysUnder } from '../src/redis/client.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

/** N transfers with `concurrency` loops of plain undici requests: the ceiling of this machine. */
async function rawLoop(url: string, ids: number[], concurrency: number): Promise<number> {
  const pool = new Pool(url, { connections: concurrency });
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < ids.length) {
        const id = ids[next++] as number;
        const res = await pool.request({
          method: 'PATCH',
          path: `/1/learner/${id}/transfer`,
          headers: {
            'user-agent': 'bench',
            accept: 'application/json',
            authorization: 'Bearer sim-acme-1',
            'content-type': 'application/json',
          },
          body: '{}',
        });
        await res.body.text();
        if (res.statusCode !== 200) throw new Error(`raw loop: status ${res.statusCode} for learner ${id}`);
      }
    }),
  );
  const ms = performance.now() - started;
  await pool.close();
  return ms;
}

export async function runTransfersBench(
  n = Number(process.env.BENCH_TRANSFERS ?? 3000),
  concurrency = 20,
): Promise<Figures> {
  // Learners not in acme: 2, 3, 5, 6, ... (learner i is in organizations[(i-1) % 3]).
  const movable = Array.from({ length: 5 * n + 3 }, (_, i) => i + 1).filter((id) => (id - 1) % 3 !== 0);
  const rawIds = movable.slice(0, n);
  const ourIds = movable.slice(n, 2 * n);
  const bareIds = movable.slice(2 * n, 3 * n);
  const sim = createSimulator({ learners: 5 * n + 3, repeatMode: 'error' });
  await sim.listen();
  const prefix = `lt-bench-transfers-${randomBytes(3).toString('hex')}`;
  const config = loadConfig(
    {
      REDIS_URL,
      QUEUE_PREFIX: prefix,
      LEARNER_API_BASE_URL: sim.url,
      LEARNER_API_TOKENS: 'acme:sim-acme-1,acme:sim-acme-2',
      LIMIT_PER_TOKEN: '1000000/1s',
      LIMIT_PER_ORG: '1000000/1s',
      CONCURRENCY: String(concurrency),
      SPOOL_DIR: join(mkdtempSync(join(tmpdir(), 'lt-bench-spool-')), 'spool'),
    },
    { requireBaseUrl: true, requireTokens: true },
  );
  const ctx = await createContext(config, { logger: createLogger({ level: 'error' }) });
  try {
    const rawMs = await rawLoop(sim.url, rawIds, concurrency);
    const pipeline = async (ids: number[], runId: string, spool: boolean): Promise<number> => {
      const file = join(mkdtempSync(join(tmpdir(), 'lt-bench-')), 'ids.csv');
      writeFileSync(file, `learnerId\n${ids.join('\n')}\n`);
      await ctx.runs.create({ id: runId, kind: 'csv', source: file, orgs: ['acme'] });
      await enqueueCsv(
        { producer: ctx.producer, runs: ctx.runs },
        {
          file,
          defaultOrg: 'acme',
          knownOrgs: config.orgs,
          runId,
          rejectsFile: join(tmpdir(), 'lt-bench-r.csv'),
        },
      );
      const started = performance.now();
      const handle = startWorkers(ctx, {
        orgs: ['acme'],
        concurrency,
        untilIdle: true,
        idleCheckMs: 50,
        spool,
      });
      const result = await handle.done;
      const ms = performance.now() - started;
      if (result.succeeded !== n) throw new Error(`pipeline: ${result.succeeded} of ${n} succeeded`);
      return ms;
    };
    // Without the write-ahead spool first (the baseline of what the spool costs), then as shipped.
    const bareMs = await pipeline(bareIds, 'bench-bare', false);
    const ourMs = await pipeline(ourIds, 'bench', true);
    const twice = [...ourIds, ...bareIds].filter((id) => sim.ownerChanges(id) !== 1).length;
    return {
      transfers: n,
      concurrency,
      'raw undici transfers/s (baseline)': Math.round((n / rawMs) * 1000),
      'pipeline transfers/s': Math.round((n / ourMs) * 1000),
      'pipeline / raw undici': round(rawMs / ourMs, 3),
      'pipeline without spool transfers/s': Math.round((n / bareMs) * 1000),
      'pipeline with spool / without (goal >= 0.9)': round(bareMs / ourMs, 3),
      'learners not moved exactly once': twice,
    };
  } finally {
    await ctx.close();
    const redis = new Redis(REDIS_URL);
    await deleteKeysUnder(redis, prefix);
    await redis.quit();
    await sim.close();
  }
}

if (isMain(import.meta.url))
  printFigures('transfers benchmark (same simulator, same run)', await runTransfersBench());
