// Builds a full pipeline (config, context, simulator) for end-to-end tests, with a log that is captured
// so tests can scan it for tokens.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createContext, type AppContext } from '../../src/app/context.ts';
import { newRunId } from '../../src/outcomes/runs.ts';
import { enqueueCsv, type EnqueueCsvSummary } from '../../src/queue/enqueue-csv.ts';
import { startWorkers, type WorkOptions, type WorkResult } from '../../src/worker/run-workers.ts';
import { loadConfig, secretsOf, type Config } from '../../src/core/config.ts';
import { createLogger } from '../../src/core/log.ts';
import { createSimulator, type Simulator, type SimulatorOptions } from '../../src/simulator/index.ts';
import { deletePrefix, newRedis, randomPrefix, REDIS_URL } from './redis.ts';
import { closeRedis, createRedis } from '../../src/redis/client.ts';
import type { SpanExporter } from '@opentelemetry/sdk-trace-node';

export interface Harness {
  sim: Simulator;
  ctx: AppContext;
  config: Readonly<Config>;
  env: Record<string, string>;
  logLines: string[];
  prefix: string;
  dir: string;
  writeFile(name: string, text: string): string;
  /** Runs workers in this process until nothing waits (startWorkers with untilIdle), for acme by default. */
  workUntilIdle(options?: Partial<WorkOptions>): Promise<WorkResult>;
  /** Writes the ids as a CSV and enqueues it in a new run, as `enqueue --csv FILE --org ORG` does. */
  enqueueIds(
    ids: readonly number[],
    org?: string,
    options?: { runId?: string },
  ): Promise<{ runId: string; summary: EnqueueCsvSummary }>;
  close(): Promise<void>;
}

const SEED_ORGS = ['acme', 'beta', 'gamma'] as const;

/**
 * `count` learner ids from `from` up that the simulator's seed puts outside `org` (learner i belongs to
 * organizations[(i - 1) % 3]: acme, beta, gamma), so a transfer into `org` moves them.
 */
export function learnersNotIn(org: (typeof SEED_ORGS)[number], count: number, from = 2): number[] {
  const ids: number[] = [];
  for (let id = from; ids.length < count; id++) if (SEED_ORGS[(id - 1) % 3] !== org) ids.push(id);
  return ids;
}

export interface HarnessOptions {
  sim?: SimulatorOptions;
  env?: Record<string, string>;
  tag?: string;
  /** A Redis of the test's own (default: the shared REDIS_URL). */
  redisUrl?: string;
  /** A cluster or Sentinel of the test's own: REDIS_CLUSTER_NODES or REDIS_SENTINELS + _MASTER. */
  redisEnv?: Record<string, string>;
  /** The API base URL the workers use (default: the simulator's; a proxy in front of it, say). */
  baseUrl?: (simUrl: string) => string | Promise<string>;
  /** Spans go here (tracing on, whatever the environment says): a test's in-memory exporter. */
  traceExporter?: SpanExporter;
}

/** The environment of a harness's fleet: small compressed limits, short timeouts, its own prefix and spool. */
function harnessEnv(
  options: HarnessOptions,
  baseUrl: string,
  prefix: string,
  dir: string,
): Record<string, string> {
  return {
    REDIS_URL: options.redisUrl ?? REDIS_URL,
    ...options.redisEnv,
    QUEUE_PREFIX: prefix,
    LEARNER_API_BASE_URL: baseUrl,
    LEARNER_API_TOKENS: 'acme:sim-acme-1,acme:sim-acme-2',
    LIMIT_PER_TOKEN: '20/2s',
    LIMIT_PER_ORG: '60/4s',
    LIMIT_BURST: 'off',
    REQUEST_TIMEOUT: '1500ms',
    CONNECT_TIMEOUT: '500ms',
    BACKOFF: '50ms',
    ATTEMPTS: '4',
    CONCURRENCY: '10',
    LOG_LEVEL: 'debug',
    SPOOL_DIR: join(dir, 'spool'),
    LEASE_GRACE: '1s',
    ...options.env,
  };
}

export async function startHarness(options: HarnessOptions = {}): Promise<Harness> {
  const sim = createSimulator(options.sim ?? {});
  await sim.listen();
  const prefix = randomPrefix(options.tag ?? 'e2e');
  const dir = mkdtempSync(join(tmpdir(), 'lt-e2e-'));
  const env = harnessEnv(options, options.baseUrl ? await options.baseUrl(sim.url) : sim.url, prefix, dir);
  const config = loadConfig(env, { requireBaseUrl: true, requireTokens: true });
  const logLines: string[] = [];
  const logger = createLogger({
    level: 'debug',
    secrets: secretsOf(config),
    destination: { write: (line: string) => void logLines.push(line) },
  });
  const redis = options.redisEnv ? createRedis(config.redis, 'lt-test') : newRedis(options.redisUrl);
  redis.on('error', () => {});
  const ctx = await createContext(config, {
    logger,
    redis,
    ...(options.traceExporter ? { traceExporter: options.traceExporter } : {}),
  });
  return {
    sim,
    ctx,
    config,
    env,
    logLines,
    prefix,
    dir,
    writeFile(name, text) {
      const path = join(dir, name);
      writeFileSync(path, text);
      return path;
    },
    workUntilIdle(options = {}) {
      return startWorkers(ctx, {
        orgs: ['acme'],
        concurrency: 2,
        untilIdle: true,
        idleCheckMs: 100,
        ...options,
      }).done;
    },
    async enqueueIds(ids, org = 'acme', options = {}) {
      // A given run id adds to that run (and its organizations), as `enqueue --run ID` does.
      const runId = options.runId ?? newRunId();
      const file = join(dir, `${runId}-${org}-${ids.length}.csv`);
      writeFileSync(file, `learnerId\n${ids.join('\n')}\n`);
      if (!(await ctx.runs.get(runId))) {
        await ctx.runs.create({ id: runId, kind: 'csv', source: `${runId}.csv`, orgs: [org] });
      }
      const summary = await enqueueCsv(
        { producer: ctx.producer, runs: ctx.runs },
        {
          file,
          defaultOrg: org,
          knownOrgs: config.orgs,
          runId,
          rejectsFile: join(dir, `${runId}-rejects.csv`),
        },
      );
      return { runId, summary };
    },
    async close() {
      await ctx.close();
      await deletePrefix(redis, prefix);
      await closeRedis(redis);
      await sim.close();
    },
  };
}
