// Utilization under pacing: long compressed runs of real workers against the simulator, two tokens paced
// with a small burst (then one permit every 100 ms, or every 1 s, per token), against what paced
// tokens allow: the ETA's exact simulation of the limiter (windows and buckets, src/limiter/simulate/)
// gives the earliest the last of N permits can be granted; the run's span is from the simulator's first
// PATCH to its last. Utilization = allowed span / real span (1: every permit went the moment its bucket
// and window allowed it). Also: the most calls any token had in one window of the service, and its
// 429s (both must stay within the limit: the windows are the law).
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { createContext, type AppContext } from '../src/app/context.ts';
import { loadConfig, type Config } from '../src/core/config.ts';
import { createLogger } from '../src/core/log.ts';
import { simulate } from '../src/limiter/simulate/index.ts';
import { enqueueCsv } from '../src/queue/enqueue-csv.ts';
import { deleteKeysUnder } from '../src/redis/client.ts';
import { createSimulator } from '../src/simulator/index.ts';
import { startWorkers } from '../src/worker/run-workers.ts';
import { isMain, printFigures, round, type Figures } from './common.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

/** One compressed run: two tokens of `perToken` per `windowMs`, paced with `burst`, `n` learners. */
interface Shape {
  perToken: number;
  windowMs: number;
  burst: number;
  n: number;
}

/** The most of `times` inside any span of `windowMs`. */
function mostInWindow(times: number[], windowMs: number): number {
  const t = [...times].sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; i < t.length; i++) {
    while ((t[i] ?? 0) - (t[j] ?? 0) >= windowMs) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

/** The learners as one CSV run, enqueued as `enqueue` would. */
async function enqueueIds(ctx: AppContext, config: Config, ids: number[]): Promise<void> {
  const file = join(mkdtempSync(join(tmpdir(), 'lt-bench-')), 'ids.csv');
  writeFileSync(file, `learnerId\n${ids.join('\n')}\n`);
  await ctx.runs.create({ id: 'bench-pacing', kind: 'csv', source: file, orgs: ['acme'] });
  await enqueueCsv(
    { producer: ctx.producer, runs: ctx.runs },
    {
      file,
      defaultOrg: 'acme',
      knownOrgs: config.orgs,
      runId: 'bench-pacing',
      rejectsFile: join(tmpdir(), 'lt-bench-r.csv'),
    },
  );
}

async function paced({ perToken: PER_TOKEN, windowMs: WINDOW_MS, burst: BURST, n }: Shape): Promise<Figures> {
  const movable = Array.from({ length: 3 * n + 3 }, (_, i) => i + 1).filter((id) => (id - 1) % 3 !== 0);
  const ids = movable.slice(0, n);
  const sim = createSimulator({
    learners: 3 * n + 3,
    faults: { latencyAfterMs: [1, 2] },
    limits: {
      perToken: { max: PER_TOKEN, windowMs: WINDOW_MS },
      perOrg: { max: 1_000_000, windowMs: WINDOW_MS },
      window: 'rolling',
    },
  });
  await sim.listen();
  const prefix = `lt-bench-pacing-${randomBytes(3).toString('hex')}`;
  const config = loadConfig(
    {
      REDIS_URL,
      QUEUE_PREFIX: prefix,
      LEARNER_API_BASE_URL: sim.url,
      LEARNER_API_TOKENS: 'acme:sim-acme-1,acme:sim-acme-2',
      LIMIT_PER_TOKEN: `${PER_TOKEN}/${WINDOW_MS}ms`,
      LIMIT_PER_ORG: `1000000/${WINDOW_MS}ms`,
      LIMIT_BURST: String(BURST),
      CONCURRENCY: '10',
      SPOOL_DIR: join(mkdtempSync(join(tmpdir(), 'lt-bench-spool-')), 'spool'),
    },
    { requireBaseUrl: true, requireTokens: true },
  );
  const ctx = await createContext(config, { logger: createLogger({ level: 'error' }) });
  try {
    await enqueueIds(ctx, config, ids);
    const result = await startWorkers(ctx, {
      orgs: ['acme'],
      concurrency: 10,
      untilIdle: true,
      idleCheckMs: 50,
    }).done;
    if (result.succeeded !== n) throw new Error(`pacing: ${result.succeeded} of ${n} succeeded`);
    const calls = sim.record.filter((r) => r.method === 'PATCH');
    const times = calls.map((c) => c.receivedAt);
    const span = Math.max(...times) - Math.min(...times);
    const token = { limit: PER_TOKEN, windowMs: WINDOW_MS, frees: [], blockedMs: 0 };
    const pace = { burst: BURST, intervalMs: WINDOW_MS / PER_TOKEN, tatMs: 0 };
    const allowed = simulate({
      remaining: n,
      org: { limit: 1_000_000, windowMs: WINDOW_MS, frees: [], blockedMs: 0 },
      tokens: [
        { ...token, pace },
        { ...token, pace },
      ],
    }).finishMs;
    const byToken = new Map<string, number[]>();
    for (const c of calls)
      byToken.set(String(c.tokenLabel), [...(byToken.get(String(c.tokenLabel)) ?? []), c.receivedAt]);
    return {
      transfers: n,
      'tokens x limit, burst': `2 x ${PER_TOKEN}/${WINDOW_MS / 1000}s, ${BURST} (one every ${WINDOW_MS / PER_TOKEN} ms after it)`,
      'allowed span (s)': round(allowed / 1000, 2),
      'real span (s)': round(span / 1000, 2),
      'utilization (goal >= 0.99)': round(allowed / span, 3),
      [`most calls of a token in one window (limit ${PER_TOKEN})`]: Math.max(
        ...[...byToken.values()].map((t) => mostInWindow(t, WINDOW_MS)),
      ),
      '429 answers': calls.filter((c) => c.status === 429).length,
    };
  } finally {
    await ctx.close();
    const redis = new Redis(REDIS_URL);
    await deleteKeysUnder(redis, prefix);
    await redis.quit();
    await sim.close();
  }
}

/**
 * Two intervals: 100 ms (each wake-up's own cost shows: a refusal's sleep is BullMQ's rate-limit cycle)
 * and 1 s (the same cost over a ten times longer interval). A real token of 100/1h paces at 36 s.
 */
export async function runPacingBench(): Promise<Figures> {
  const scale = Number(process.env.BENCH_PACING_SCALE ?? 1);
  const fast = await paced({ perToken: 20, windowMs: 2000, burst: 2, n: Math.round(240 * scale) });
  const slow = await paced({ perToken: 10, windowMs: 10_000, burst: 1, n: Math.round(40 * scale) });
  const out: Figures = {};
  for (const [k, v] of Object.entries(fast)) out[`100 ms: ${k}`] = v;
  for (const [k, v] of Object.entries(slow)) out[`1 s: ${k}`] = v;
  return out;
}

if (isMain(import.meta.url))
  printFigures('pacing benchmark (real workers, the simulator)', await runPacingBench());
