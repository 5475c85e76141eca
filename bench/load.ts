// Load: LOAD_LEARNERS (default 100,000) learners through the whole pipeline (CSV -> producer -> BullMQ
// -> LOAD_WORKERS `work --until-idle` processes -> limiter -> the simulator) with compressed limits,
// reporting wall time, peak RSS per process, Redis memory and the simulator's limit violations (must be
// 0). Not a test: `node bin/run-ts.js bench/load.ts`. Uses the shared Redis under a random prefix.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createContext } from '../src/app/context.ts';
import { loadConfig } from '../src/core/config.ts';
import { createLogger } from '../src/core/log.ts';
import { newRunId } from '../src/outcomes/runs.ts';
import { enqueueCsv } from '../src/queue/enqueue-csv.ts';
import { createSimulator } from '../src/simulator/index.ts';
import { isMain, mb, printFigures, round, type Figures } from './common.ts';
import { deleteKeysUnder, masters, type RedisClient } from '../src/redis/client.ts';

const ROOT = join(import.meta.dirname, '..');

function envInt(name: string, fallback: number): number {
  const n = Number(process.env[name] ?? fallback);
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`${name}: expected a whole number >= 1`);
  return n;
}

/** used_memory summed over every master (one on a single server). */
async function usedMemory(redis: RedisClient): Promise<number> {
  const infos = await Promise.all(masters(redis).map((node) => node.info('memory')));
  return infos.reduce((sum, info) => sum + Number(/used_memory:(\d+)/.exec(info)?.[1] ?? 0), 0);
}

interface Child {
  code: number | null;
  maxRssKb: number;
  stderr: string;
}

function runWorker(env: Record<string, string>, concurrency: number): Promise<Child> {
  const child = spawn(
    process.execPath,
    [join(ROOT, 'bin', 'learner-transfer.js'), 'work', '--until-idle', '--concurrency', String(concurrency)],
    {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', LT_FROM_SOURCE: '1', LT_REPORT_RSS: '1', ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-20_000)));
  return new Promise((resolve) =>
    child.on('exit', (code) => {
      const m = /lt-rss (\{.*\})/.exec(stderr);
      const maxRssKb = m ? (JSON.parse(m[1] ?? '{}') as { maxRssKb: number }).maxRssKb : 0;
      resolve({ code, maxRssKb, stderr });
    }),
  );
}

/** `count` learner ids outside acme: learner i belongs to organization (i-1) % 3 in the simulator's seed. */
function movableIds(count: number): number[] {
  const ids: number[] = [];
  for (let id = 2; ids.length < count; id++) if ((id - 1) % 3 !== 0) ids.push(id);
  return ids;
}

/** The workers' environment: quick timeouts, the bench's own prefix, its tokens and limits. */
function loadEnv(
  prefix: string,
  tokens: { token: string }[],
  perToken: string,
  perOrg: string,
): Record<string, string> {
  return {
    REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    QUEUE_PREFIX: prefix,
    LEARNER_API_TOKENS: tokens.map((t) => `acme:${t.token}`).join(','),
    LIMIT_PER_TOKEN: perToken,
    LIMIT_PER_ORG: perOrg,
    REQUEST_TIMEOUT: '500ms',
    CONNECT_TIMEOUT: '500ms',
    BACKOFF: '100ms',
    LOG_LEVEL: 'warn',
  };
}

/** Runs the workers, sampling Redis's used memory each second: their results, the wall time, the peak. */
async function workSampled<T>(redis: RedisClient, memQueued: number, work: () => Promise<T>) {
  let memPeak = memQueued;
  const sampler = setInterval(() => {
    usedMemory(redis).then(
      (m) => (memPeak = Math.max(memPeak, m)),
      () => {},
    );
  }, 1000);
  const t1 = Date.now();
  try {
    const children = await work();
    return { children, wallMs: Date.now() - t1, memPeak };
  } finally {
    clearInterval(sampler);
  }
}

export async function runLoadBench(): Promise<Figures> {
  const learners = envInt('LOAD_LEARNERS', 100_000);
  const workers = envInt('LOAD_WORKERS', 4);
  const concurrency = envInt('LOAD_CONCURRENCY', 32);
  const perToken = process.env.LOAD_LIMIT_PER_TOKEN ?? '2000/1s';
  const perOrg = process.env.LOAD_LIMIT_PER_ORG ?? '8000/1s';
  const prefix = `lt-bench-load-${Date.now().toString(36)}`;
  const tokens = [1, 2, 3, 4].map((i) => ({ token: `load-acme-token-${i}`, org: 'acme' }));

  const ids = movableIds(learners);
  const env = loadEnv(prefix, tokens, perToken, perOrg);
  const config = loadConfig(env, { requireTokens: true });
  const sim = createSimulator({
    learners: (ids.at(-1) ?? 0) + 1,
    tokens,
    limits: { perToken: config.limitPerToken, perOrg: config.limitPerOrg, window: 'rolling' },
  });
  await sim.listen();
  env.LEARNER_API_BASE_URL = sim.url;
  const ctx = await createContext(config, { logger: createLogger({ level: 'warn' }) });
  const dir = mkdtempSync(join(tmpdir(), 'lt-load-'));
  const redis = ctx.redis;
  try {
    const memStart = await usedMemory(redis);
    const file = join(dir, 'load.csv');
    writeFileSync(file, `learner_id\n${ids.join('\n')}\n`);
    const runId = newRunId();
    await ctx.runs.create({ id: runId, kind: 'csv', source: 'load.csv', orgs: ['acme'] });
    const t0 = Date.now();
    const s = await enqueueCsv(
      { producer: ctx.producer, runs: ctx.runs },
      { file, defaultOrg: 'acme', knownOrgs: config.orgs, runId, rejectsFile: join(dir, 'rejects.csv') },
    );
    const enqueueMs = Date.now() - t0;
    const memQueued = await usedMemory(redis);

    const { children, wallMs, memPeak } = await workSampled(redis, memQueued, () =>
      Promise.all(Array.from({ length: workers }, () => runWorker(env, concurrency))),
    );
    const memEnd = await usedMemory(redis);

    const counts = await ctx.store.orgCounts('acme');
    let twice = 0;
    for (const id of ids) if (sim.ownerChanges(id) > 1) twice++;
    const transfers = sim.record.filter((r) => r.countedAt !== undefined).length;
    const figures: Figures = {
      learners,
      'worker processes': workers,
      'concurrency per worker': concurrency,
      limits: `${perToken} per token x ${tokens.length}, ${perOrg} per org`,
      'enqueue s': round(enqueueMs / 1000, 1),
      enqueued: s.enqueued,
      'work wall time s': round(wallMs / 1000, 1),
      'transfers/s': round(learners / (wallMs / 1000), 0),
      'requests counted by the service': transfers,
      '429 answers': sim.record.filter((r) => r.status === 429).length,
      'limit violations (must be 0)': sim.violations().length,
      'learners moved twice (must be 0)': twice,
      'outcomes transferred': counts.transferred ?? 0,
      'outcomes other':
        Object.entries(counts)
          .filter(([k]) => k !== 'transferred' && k !== 'total')
          .map(([k, v]) => `${k} ${v}`)
          .join(', ') || 'none',
      'worker exit codes': children.map((c) => c.code).join(' '),
      'peak RSS per worker MB': children.map((c) => round(c.maxRssKb / 1024, 0)).join(' '),
      'peak RSS bench process (simulator + producer) MB': mb(process.resourceUsage().maxRSS * 1024),
      'Redis used_memory start MB': mb(memStart),
      'Redis used_memory after enqueue (+ MB)': mb(memQueued - memStart),
      'Redis used_memory peak during work (+ MB)': mb(memPeak - memStart),
      'Redis used_memory end (+ MB, outcome records)': mb(memEnd - memStart),
      'Redis bytes per learner at end': round((memEnd - memStart) / learners, 0),
    };
    const bad = children.find((c) => c.code !== 0);
    if (bad) process.stderr.write(`a worker exited ${bad.code}:\n${bad.stderr.slice(-3000)}\n`);
    return figures;
  } finally {
    await deleteKeysUnder(redis, prefix);
    await ctx.close();
    await sim.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (isMain(import.meta.url)) {
  printFigures('load: the whole pipeline under compressed limits', await runLoadBench());
}
