// One fleet of bench/orgs.ts: a redis-server of its own (so CLIENT LIST and INFO count nobody else), the
// simulator in this process with one token per organization and no limits, and ONE `work` process (the
// binary, as users run it) serving every organization. Learner i of the simulator belongs to
// organization (i - 1) % count, with a last organization `pool` that no token serves, so that every
// organization has learners elsewhere to move in.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { createContext, type AppContext } from '../src/app/context.ts';
import { loadConfig } from '../src/core/config.ts';
import { createLogger } from '../src/core/log.ts';
import { progressOf } from '../src/outcomes/run-progress.ts';
import { newRunId } from '../src/outcomes/runs.ts';
import type { OutcomeStore } from '../src/outcomes/store.ts';
import { enqueueCsv } from '../src/queue/enqueue-csv.ts';
import { createSimulator, type SimOrg, type Simulator } from '../src/simulator/index.ts';
import { spawnCli, waitExit } from '../test/helpers/cli.ts';
import { startOwnRedis, type OwnRedis } from '../test/helpers/redis-server.ts';
import { clientsOtherThan, commandsProcessed, readingCost, type Clients } from './orgs-probes.ts';
import { tokensVariable, type OrgToken } from './orgs-tokens.ts';

export const BENCH_CLIENT = 'lt-bench-orgs';
const PREFIX = 'ltbench';
/** No budget binds: what is measured is the cost of organizations, not of waiting for permits. */
const LIFTED = '1000000/1s';

type Work = ReturnType<typeof spawnCli>;

export interface Fleet {
  readonly tokens: readonly OrgToken[];
  readonly redis: OwnRedis;
  /** The bench's one connection to that server (named BENCH_CLIENT). */
  readonly monitor: Redis;
  /** What one INFO reading adds to the next (its own command), measured before `work` started. */
  readonly readingCost: number;
  readonly sim: Simulator;
  readonly work: Work;
  readonly pid: number;
  readonly dir: string;
  /** Learners to move into each organization. */
  readonly learners: ReadonlyMap<string, readonly number[]>;
  /** What `work` was given over workEnv (its limits): the bench's own context reads the same. */
  readonly env: Readonly<Record<string, string>>;
}

export interface FleetOptions {
  tokens: readonly OrgToken[];
  /** How the tokens reach the process (tokenEnv). */
  tokenEnv: Record<string, string>;
  learnersPerOrg: number;
  concurrency: number;
  /** Variables over workEnv's, for `work` and the bench's own context (LIMIT_PER_TOKEN, LIMIT_BURST). */
  env?: Record<string, string>;
}

/** For each organization, the next learners of the seed that are not already in it. */
function learnersToMove(simOrgs: readonly SimOrg[], perOrg: number): Map<string, number[]> {
  const out = new Map<string, number[]>();
  let id = 1;
  simOrgs.forEach((org, index) => {
    if (org.key === 'pool') return;
    const ids: number[] = [];
    for (; ids.length < perOrg; id++) if ((id - 1) % simOrgs.length !== index) ids.push(id);
    out.set(org.key, ids);
  });
  return out;
}

export function workEnv(fleet: Pick<Fleet, 'redis' | 'sim' | 'dir'>, concurrency: number) {
  return {
    REDIS_URL: fleet.redis.url,
    QUEUE_PREFIX: PREFIX,
    LEARNER_API_BASE_URL: fleet.sim.url,
    SPOOL_DIR: join(fleet.dir, 'spool'),
    LOG_LEVEL: 'warn',
    LIMIT_PER_TOKEN: LIFTED,
    LIMIT_PER_ORG: LIFTED,
    CONCURRENCY: String(concurrency),
    BACKOFF: '200ms',
    // The audit archive on, as in production: its idle cost (one SCARD per interval) is in the figures.
    AUDIT_ARCHIVE_DIR: join(fleet.dir, 'audit'),
    AUDIT_ARCHIVE_INTERVAL: process.env.BENCH_ORGS_ARCHIVE_INTERVAL ?? '5m',
    // BENCH_ORGS_NOTIFY_URL: notifications on (docs/notifications.md), to show that they cost an idle
    // fleet nothing per organization; nothing is posted while idle, so any URL does.
    ...(process.env.BENCH_ORGS_NOTIFY_URL ? { NOTIFY_WEBHOOK_URL: process.env.BENCH_ORGS_NOTIFY_URL } : {}),
  };
}

export async function openFleet(o: FleetOptions): Promise<Fleet> {
  const dir = mkdtempSync(join(tmpdir(), 'lt-bench-orgs-'));
  const simOrgs: SimOrg[] = o.tokens.map((t, i) => ({ id: i + 1, key: t.org, name: `School ${t.org}` }));
  simOrgs.push({ id: simOrgs.length + 1, key: 'pool', name: 'Pool' });
  const learners = learnersToMove(simOrgs, o.learnersPerOrg);
  const sim = createSimulator({
    organizations: simOrgs,
    tokens: [...o.tokens],
    learners: Math.max(...[...learners.values()].map((ids) => ids.at(-1) ?? 0)) + 1,
  });
  await sim.listen();
  // The private server keeps nothing on disk: only its counters matter.
  const redis = await startOwnRedis(['--appendonly', 'no', '--maxclients', '10000']).catch(
    async (err: unknown) => {
      await sim.close();
      throw err;
    },
  );
  const monitor = new Redis(redis.url, { connectionName: BENCH_CLIENT, maxRetriesPerRequest: 1 });
  const cost = await readingCost(monitor);
  const base = { redis, sim, dir };
  const env = o.env ?? {};
  const work = spawnCli(['work'], { ...workEnv(base, o.concurrency), ...env, ...o.tokenEnv });
  return {
    ...base,
    env,
    tokens: o.tokens,
    monitor,
    readingCost: cost,
    work,
    pid: work.pid ?? -1,
    learners,
  };
}

/** The end of the process's stderr, without any token (none should be there; a report must not show one). */
export function stderrTail(fleet: Fleet, chars = 600): string {
  return fleet.work.output.stderr
    .slice(-chars)
    .replace(/tok-o\d+-[0-9a-f]+/g, '***')
    .trim();
}

export function alive(fleet: Fleet): boolean {
  return fleet.work.exitCode === null && fleet.work.signalCode === null;
}

/** Whether a second goes by with at most 2 commands on the server, the bench's own readings aside. */
async function quietSecond(fleet: Fleet): Promise<boolean> {
  const cost = await readingCost(fleet.monitor);
  const a = await commandsProcessed(fleet.monitor);
  await sleep(1000);
  const b = await commandsProcessed(fleet.monitor);
  return b - a - cost <= 2;
}

/** Waits until the process's connections stay the same for `steadyS` seconds in a row. */
export async function settle(fleet: Fleet, timeoutMs: number, steadyS = 3): Promise<Clients> {
  const deadline = Date.now() + timeoutMs;
  let last: Clients | undefined;
  let steady = 0;
  for (;;) {
    await sleep(1000);
    if (!alive(fleet)) throw new Error(`work exited (${fleet.work.exitCode}): ${stderrTail(fleet)}`);
    const now = await clientsOtherThan(fleet.monitor, BENCH_CLIENT);
    steady = last && now.count === last.count && now.count > 0 ? steady + 1 : 0;
    last = now;
    // Connections that stay flat are not enough: a process that attaches workers only where there is
    // work holds the same few connections while its start-up sweeps still read every organization. It
    // has settled when, besides, a second goes by with next to no commands (the bench's own aside).
    if (steady >= steadyS && (await quietSecond(fleet))) return now;
    if (Date.now() > deadline)
      throw new Error(`work did not settle in ${timeoutMs / 1000} s (${now.count} connections at the end)`);
  }
}

export interface Move {
  ms: number;
  enqueueMs: number;
  done: number;
  failed: number;
  rateLimited: number;
}

/** Sums the run's counters over every organization, a few hundred round trips at a time. */
async function runProgress(fleet: Fleet, store: OutcomeStore, runId: string) {
  let done = 0;
  let failed = 0;
  const orgs = [...fleet.learners.keys()];
  for (let i = 0; i < orgs.length; i += 500) {
    const counts = await Promise.all(orgs.slice(i, i + 500).map((org) => store.runCounts(org, runId)));
    for (const c of counts) {
      const p = progressOf(c);
      done += p.done;
      failed += p.failed;
    }
  }
  return { done, failed };
}

/** A context of the bench's own on the fleet's server (its producer, store, keys), with every token. */
export async function benchContext(fleet: Fleet): Promise<AppContext> {
  const env = { ...workEnv(fleet, 1), ...fleet.env, LEARNER_API_TOKENS: tokensVariable(fleet.tokens) };
  return createContext(loadConfig(env, { requireTokens: true }), {
    logger: createLogger({ level: 'error' }),
  });
}

export interface Enqueued {
  runId: string;
  /** Learners enqueued, over every organization. */
  total: number;
  /** performance.now() at the run's creation (the CSV written). */
  startedAt: number;
  /** From then to the last learner in its queue. */
  ms: number;
}

/** Enqueues every organization's learners: one CSV with an org column, through the producer `enqueue` uses. */
export async function enqueueLearners(fleet: Fleet, ctx: AppContext): Promise<Enqueued> {
  const total = [...fleet.learners.values()].reduce((n, ids) => n + ids.length, 0);
  const file = join(fleet.dir, 'move.csv');
  const rows = [...fleet.learners].flatMap(([org, ids]) => ids.map((id) => `${org},${id}`));
  writeFileSync(file, `org,learner_id\n${rows.join('\n')}\n`);
  const runId = newRunId();
  const started = performance.now();
  await ctx.runs.create({ id: runId, kind: 'csv', source: 'move.csv', orgs: [] });
  await enqueueCsv(
    { producer: ctx.producer, runs: ctx.runs },
    { file, knownOrgs: ctx.config.orgs, runId, rejectsFile: join(fleet.dir, 'rejects.csv') },
  );
  return { runId, total, startedAt: started, ms: performance.now() - started };
}

/**
 * Enqueues every organization's learners and waits until the outcome store has a final outcome for each:
 * the simulator's record says when all were moved, so the store is read often only then.
 */
export async function moveAll(fleet: Fleet, timeoutMs: number): Promise<Move> {
  const ctx = await benchContext(fleet);
  try {
    const { runId, total, startedAt: started, ms: enqueueMs } = await enqueueLearners(fleet, ctx);
    const deadline = Date.now() + timeoutMs;
    let seen = 0;
    let moved = 0;
    let lastStoreRead = 0;
    for (;;) {
      for (; seen < fleet.sim.record.length; seen++) if (fleet.sim.record[seen]?.effectApplied) moved++;
      // Until the service has seen every transfer, read the store only now and then (a final failure
      // would leave the simulator short for ever): 10,000 organizations are 10,000 reads.
      if (moved >= total || Date.now() - lastStoreRead > 5000) {
        lastStoreRead = Date.now();
        const p = await runProgress(fleet, ctx.store, runId);
        if (p.done + p.failed >= total) {
          const rateLimited = fleet.sim.record.filter((r) => r.status === 429).length;
          return { ms: performance.now() - started, enqueueMs, ...p, rateLimited };
        }
      }
      if (!alive(fleet)) throw new Error(`work exited during the move: ${stderrTail(fleet)}`);
      if (Date.now() > deadline)
        throw new Error(`not all moved in ${timeoutMs / 1000} s (${moved} of ${total} at the service)`);
      await sleep(moved >= total ? 50 : 100);
    }
  } finally {
    await ctx.close();
  }
}

/** Stops `work` (SIGTERM, then SIGKILL after a bound), the server, the simulator; removes the files. */
export async function closeFleet(fleet: Fleet): Promise<void> {
  if (alive(fleet)) {
    fleet.work.kill('SIGTERM');
    await waitExit(fleet.work, 60_000).catch(() => undefined);
  }
  fleet.monitor.disconnect();
  await fleet.redis.close();
  await fleet.sim.close();
  rmSync(fleet.dir, { recursive: true, force: true });
}
