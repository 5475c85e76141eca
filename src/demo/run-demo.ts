// The demo: the whole tool on the built-in simulator in one process, on Redis at REDIS_URL or a
// throwaway one: enqueues a CSV, runs workers until idle with progress, writes the reports.
import { encodeBurst } from '../core/burst.ts';
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { createContext, type AppContext } from '../app/context.ts';
import { loadConfig, secretsOf, type Config } from '../core/config.ts';
import { humanizeMs, parseRate, type Rate } from '../core/duration.ts';
import { LearnerTransferError } from '../core/errors.ts';
import { createLogger } from '../core/log.ts';
import { resolveLogFormat } from '../core/log-text.ts';
import { progressOf } from '../outcomes/run-progress.ts';
import { writeReport, writeSplit } from '../ops/views/report.ts';
import { newRunId } from '../outcomes/runs.ts';
import { enqueueCsv, type EnqueueCsvSummary } from '../queue/enqueue-csv.ts';
import { createSimulator, type Simulator } from '../simulator/index.ts';
import { startWorkers } from '../worker/run-workers.ts';
import { bindTokens } from '../limiter/token-orgs.ts';
import {
  closeRedis,
  connectRedis,
  createRedis,
  deleteKeysUnder,
  describeRedis,
  safeRedisUrl,
} from '../redis/client.ts';
import { standaloneTarget, type RedisTarget } from '../core/redis-target.ts';
import {
  redisAnswers,
  redisServerOnPath,
  startThrowawayRedis,
  type ThrowawayRedis,
} from './throwaway-redis.ts';

/** Each demo has its own key prefix, deleted at its end, so demos sharing a Redis never meet. */
export function demoPrefix(): string {
  return `ltx-demo-${randomBytes(3).toString('hex')}`;
}
export const DEMO_TOKENS = 'acme:sim-acme-1,acme:sim-acme-2';
/** The demo's pacing: a quarter of each limit at once, so pacing shows in the progress line. */
const DEMO_BURST = '25%';
/** The learner the demo's simulator refuses with 403 (see jobs.example.csv). */
export const DEMO_FORBIDDEN = [200];

export interface DemoOptions {
  csv: string;
  limitPerToken: string;
  limitPerOrg: string;
  /** LIMIT_BURST of the demo (default 25%: pacing shows in the progress line). */
  burst?: string;
  outDir: string;
  print: (line: string) => void;
  /** Shown on a terminal as one live line; plain lines otherwise. */
  live: (line: string) => void;
  /** The environment the demo reads its Redis from (default: this process's). */
  env?: Record<string, string | undefined>;
  /**
   * Aborted by SIGINT/SIGTERM: the workers stop, what the demo started is removed, and runDemo
   * rejects with ABORT_ERR.
   */
  signal?: AbortSignal;
  /** Leave the demo's keys in Redis at its end (or Ctrl-C), to look at them with other commands. */
  keep?: boolean;
}

export interface DemoSession {
  ctx: AppContext;
  /** What another terminal needs to look at the demo's state: its key prefix and a token file. */
  explore: DemoExplore;
  sim: Simulator;
  runId: string;
  enqueue: EnqueueCsvSummary;
  final: Record<string, number>;
  files: { report: string; successes: string; failures: string; pending: string };
  violations: number;
  tooManyRequests: number;
  /** Stops everything the demo started. */
  close(): Promise<void>;
}

async function deleteKeys(target: RedisTarget, prefix: string): Promise<void> {
  const redis = createRedis(target, 'learner-transfer-demo-cleanup');
  try {
    await deleteKeysUnder(redis, prefix);
  } finally {
    await closeRedis(redis);
  }
}

export async function runDemo(options: DemoOptions): Promise<DemoSession> {
  const { print } = options;
  const perToken = parseRate(options.limitPerToken);
  const perOrg = parseRate(options.limitPerOrg);
  if (!perToken || !perOrg) {
    throw new LearnerTransferError(
      'LT_USAGE',
      `--limit-per-token and --limit-per-org expect N/DURATION like 10/4s`,
    );
  }

  // The Redis the rest of the tool would use (a configured cluster or Sentinel must answer), or a
  // throwaway server when nothing answers at REDIS_URL.
  const env = options.env ?? process.env;
  const redisEnv = demoRedisEnv(env);
  const configured = loadConfig(redisEnv).redis;
  if (configured.mode !== 'standalone') {
    const probe = await connectRedis(configured, { timeoutMs: 5000, name: 'learner-transfer-demo-probe' });
    await closeRedis(probe);
    print(`redis     ${describeRedis(configured)}`);
    return runWith(options, redisEnv, configured, perToken, perOrg, []);
  }
  let redisUrl = env.REDIS_URL || 'redis://127.0.0.1:6379';
  let throwaway: ThrowawayRedis | undefined;
  if (!(await redisAnswers(redisUrl))) {
    if (!redisServerOnPath()) {
      throw new LearnerTransferError(
        'LT_REDIS_UNREACHABLE',
        `no Redis answers at ${safeRedisUrl(redisUrl)} and redis-server is not on the PATH: start Redis (or install redis-server) and run the demo again`,
      );
    }
    throwaway = await startThrowawayRedis();
    print(`redis     no Redis at ${safeRedisUrl(redisUrl)}: started a throwaway one at ${throwaway.url}`);
    redisUrl = throwaway.url;
  } else {
    print(`redis     ${safeRedisUrl(redisUrl)}`);
  }
  const cleanups: (() => Promise<void>)[] = [];
  if (throwaway) cleanups.push(() => (throwaway as ThrowawayRedis).stop());
  return runWith(
    options,
    { ...redisEnv, REDIS_URL: redisUrl },
    standaloneTarget(redisUrl),
    perToken,
    perOrg,
    cleanups,
    throwaway !== undefined,
  );
}

/** The environment's REDIS_* variables (credentials included), for the demo's config. */
function demoRedisEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (k.startsWith('REDIS_') && v) out[k] = v;
  return out;
}

async function runWith(
  options: DemoOptions,
  redisEnv: Record<string, string>,
  target: RedisTarget,
  perToken: Rate,
  perOrg: Rate,
  cleanups: (() => Promise<void>)[],
  throwaway = false,
): Promise<DemoSession> {
  const cleanup = async () => {
    for (const fn of cleanups.reverse()) await fn().catch(() => {});
  };
  try {
    const keys = { cleanups, cleanup, throwaway };
    return await startDemo(options, redisEnv, target, perToken, perOrg, keys);
  } catch (err) {
    await cleanup();
    throw err;
  }
}

async function startDemo(
  options: DemoOptions,
  redisEnv: Record<string, string>,
  target: RedisTarget,
  perToken: Rate,
  perOrg: Rate,
  lifetime: { cleanups: (() => Promise<void>)[]; cleanup: () => Promise<void>; throwaway: boolean },
): Promise<DemoSession> {
  const { print } = options;
  const { cleanups, cleanup } = lifetime;
  const prefix = demoPrefix();
  // Registered first, so it runs last, once nothing writes. With --keep the keys stay, unless
  // they live in a throwaway Redis that stops with the demo anyway.
  const kept = options.keep === true && !lifetime.throwaway;
  if (!kept) cleanups.push(() => deleteKeys(target, prefix));
  const explore = writeExploreFiles(options, prefix);
  print(
    `state     Redis keys under the prefix ${prefix} ` +
      (kept
        ? '(kept after the demo: --keep)'
        : options.keep
          ? '(in the throwaway Redis: they go when it stops, --keep cannot keep them)'
          : '(deleted when the demo ends: --keep leaves them)'),
  );

  const sim = createSimulator({
    learners: 300,
    forbiddenLearnerIds: DEMO_FORBIDDEN,
    repeatMode: 'error',
    // The same limits as the workers': a budget that overran would get a 429.
    limits: { perToken, perOrg, window: 'rolling' },
    faults: { latencyBeforeMs: [5, 40], latencyAfterMs: [5, 40] },
  });
  await sim.listen(0, '127.0.0.1');
  cleanups.push(() => sim.close());
  print(`simulator ${sim.url} (the Learner API of the spec, 300 learners in acme, beta and gamma)`);

  const config = demoConfig(options, redisEnv, prefix, sim.url);
  const logger = createLogger({
    level: config.logLevel,
    secrets: secretsOf(config),
    format: resolveLogFormat(config.logFormat, process.stderr),
  });
  const ctx = await createContext(config, { logger });
  cleanups.push(() => ctx.close());
  await bindTokens(ctx.redis, ctx.keys.prefix, config.tokens, { logger });
  print(
    `limits    ${options.limitPerToken} per token (2 tokens), ${options.limitPerOrg} per organization, paced with a burst of ${encodeBurst(config.burst)}`,
  );

  const { runId, enqueue } = await enqueueDemoCsv(ctx, options);
  const final = await workUntilIdle(ctx, options, runId);
  if (options.signal?.aborted) {
    throw new LearnerTransferError(
      'ABORT_ERR',
      kept
        ? `demo stopped before the end: its processes are stopped, its keys kept under ${prefix} (${exploreCommands(explore, runId)[0]})`
        : 'demo stopped before the end: its keys and processes are removed',
    );
  }

  const report = join(options.outDir, 'report.csv');
  await writeReport(ctx.store, { orgs: ['acme'], runId }, { format: 'csv', out: report });
  const split = await writeSplit(ctx.store, { orgs: ['acme'], runId }, options.outDir);
  const tooManyRequests = sim.record.filter((r) => r.status === 429).length;
  const violations = sim.violations().length;

  return {
    ctx,
    explore,
    sim,
    runId,
    enqueue,
    final,
    files: { report, ...split.files },
    violations,
    tooManyRequests,
    close: cleanup,
  };
}

/** The demo's config: its prefix, the simulator, two tokens of acme, short timeouts and backoff. */
function demoConfig(
  options: DemoOptions,
  redisEnv: Record<string, string>,
  prefix: string,
  simUrl: string,
): Config {
  return loadConfig(
    {
      ...redisEnv,
      QUEUE_PREFIX: prefix,
      LEARNER_API_BASE_URL: simUrl,
      LEARNER_API_TOKENS: DEMO_TOKENS,
      USER_AGENT: 'learner-transfer demo (the built-in simulator)',
      LIMIT_PER_TOKEN: options.limitPerToken,
      LIMIT_PER_ORG: options.limitPerOrg,
      LIMIT_BURST: options.burst ?? DEMO_BURST,
      REQUEST_TIMEOUT: '2s',
      CONNECT_TIMEOUT: '1s',
      BACKOFF: '200ms',
      ATTEMPTS: '3',
      CONCURRENCY: '8',
      LOG_LEVEL: (options.env ?? process.env).LOG_LEVEL || 'error',
      LOG_FORMAT: (options.env ?? process.env).LOG_FORMAT || 'auto',
    },
    { requireBaseUrl: true, requireTokens: true },
  );
}

/** A run of the demo's CSV for acme, its rejects printed as they are found. */
async function enqueueDemoCsv(
  ctx: AppContext,
  options: DemoOptions,
): Promise<{ runId: string; enqueue: EnqueueCsvSummary }> {
  const { print } = options;
  const runId = newRunId();
  await ctx.runs.create({ id: runId, kind: 'csv', source: options.csv, orgs: ['acme'] });
  const enqueue = await enqueueCsv(
    { producer: ctx.producer, runs: ctx.runs },
    {
      file: options.csv,
      defaultOrg: 'acme',
      knownOrgs: ctx.config.orgs,
      runId,
      rejectsFile: join(options.outDir, 'rejects.csv'),
      onReject: (line, reason) =>
        print(`reject    ${relative(process.cwd(), options.csv)}:${line}: ${reason}`),
    },
  );
  print(
    `enqueue   run ${runId}: ${enqueue.read} rows read, ${enqueue.enqueued} enqueued, ${enqueue.rejected} rejected`,
  );
  return { runId, enqueue };
}

/** Workers until the queue is idle, with a live line of progress and budget; the final counts. */
async function workUntilIdle(
  ctx: AppContext,
  options: DemoOptions,
  runId: string,
): Promise<Record<string, number>> {
  const { config } = ctx;
  const started = Date.now();
  const handle = startWorkers(ctx, {
    orgs: ['acme'],
    concurrency: config.concurrency,
    untilIdle: true,
    idleCheckMs: 250,
  });
  const tick = setInterval(() => {
    void showProgress(ctx, options, runId).catch(() => {});
  }, 500);
  const stop = () => void handle.stop();
  options.signal?.addEventListener('abort', stop, { once: true });
  if (options.signal?.aborted) stop();
  const result = await handle.done.finally(() => {
    clearInterval(tick);
    options.signal?.removeEventListener('abort', stop);
  });

  const counts = await ctx.store.runCounts('acme', runId);
  const final: Record<string, number> = {};
  for (const [k, v] of Object.entries(counts)) if (k !== 'total' && v) final[k] = v;
  options.print(
    `work      ${options.signal?.aborted ? 'stopped after' : 'finished in'} ${((Date.now() - started) / 1000).toFixed(1)} s: ${result.succeeded} succeeded, ${result.failed} failed`,
  );
  return final;
}

async function showProgress(ctx: AppContext, options: DemoOptions, runId: string): Promise<void> {
  const c = await ctx.store.runCounts('acme', runId);
  const view = await ctx.budget.peek(
    'acme',
    ctx.config.tokens.map((t) => t.id),
  );
  const { done, failed, waiting } = progressOf(c);
  const spent = view.org.remaining === 0 || view.tokens.every((t) => t.remaining === 0);
  // Paced: the windows have room, but the organization's bucket (or every token's) is empty.
  const paced =
    view.org.pace?.available === 0 ||
    view.tokens.every((t) => t.pace !== undefined && t.pace.available === 0);
  const paceIn = Math.max(
    view.org.pace?.nextInMs ?? 0,
    Math.min(...view.tokens.map((t) => t.pace?.nextInMs ?? 0)),
  );
  const wait = spent
    ? ` (budget spent: next permit in ${humanizeMs(Math.max(view.org.nextFreeInMs, Math.min(...view.tokens.map((t) => t.nextFreeInMs))))})`
    : waiting > 0 && paced
      ? ` (paced: next permit in ${paceIn < 1000 ? `${Math.max(1, Math.round(paceIn))} ms` : humanizeMs(paceIn)})`
      : '';
  options.live(
    `work      ${done} done, ${failed} failed, ${waiting} waiting | budget: org ${view.org.remaining}/${view.org.limit}, tokens ${view.tokens.map((t) => `${t.remaining}/${t.limit}`).join(' ')}${wait}`,
  );
}

/** What the demo prints so its state can be looked at from another terminal. */
export interface DemoExplore {
  prefix: string;
  /** A token file of the demo's organization (the simulator's tokens, never a real one). */
  tokensFile: string;
  /** The demo's LIMIT_*, so the commands compare the stored limits with these, not 100/1h. */
  limits: string;
}

/**
 * The token file another terminal points LEARNER_API_TOKENS_FILE at, beside the reports: a
 * command line is no place for a token, even the simulator's.
 */
function writeExploreFiles(options: DemoOptions, prefix: string): DemoExplore {
  const { outDir } = options;
  mkdirSync(outDir, { recursive: true });
  const tokensFile = join(outDir, 'demo-tokens');
  writeFileSync(
    tokensFile,
    `# The demo's simulator tokens (learner-transfer demo, prefix ${prefix})\n${DEMO_TOKENS.split(',').join('\n')}\n`,
    { mode: 0o600 },
  );
  const limits = `LIMIT_PER_TOKEN=${options.limitPerToken} LIMIT_PER_ORG=${options.limitPerOrg} LIMIT_BURST=${options.burst ?? DEMO_BURST}`;
  return { prefix, tokensFile, limits };
}

/** The commands that look at the demo's state, as a person types them in another terminal. */
export function exploreCommands(explore: DemoExplore, runId: string): string[] {
  return [
    `export QUEUE_PREFIX=${explore.prefix} LEARNER_API_TOKENS_FILE=${explore.tokensFile} ${explore.limits}`,
    'npx learner-transfer status',
    `npx learner-transfer report --run ${runId}`,
    `npx learner-transfer audit --run ${runId}`,
  ];
}
