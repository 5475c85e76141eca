// High-availability benchmark (not a test): `npm run bench:ha`. Starts its own Redis topologies from the
// redis-server binary (one standalone server, a 3+3 Redis Cluster, 1 master + 1 replica + 3 sentinels) and
// measures, in one run on the same machine:
// - limiter: acquire+settle cycles/s (TransferBudget, limits lifted), each followed by the WAIT the worker
//   sends (Durability.replicated), on each topology with WAIT on (REDIS_WAIT_TIMEOUT=1s) and off (0);
//   rounds interleave the configurations and each keeps its median;
// - pipeline: transfers/s through the whole pipeline (limits lifted, in-process simulator without latency,
//   as bench/transfers.ts), on the same topologies;
// - failover: two `work` processes against the cluster, then Sentinel, and the master serving the
//   organization's keys SIGKILLed mid-run: failover time, the stall in transfer requests that the
//   simulator saw, learners that were tried more than once, 429s and overlapping calls (must be 0).
// BENCH_HA_ONLY=limiter,pipeline,failover runs a subset; the other BENCH_HA_* variables below scale it.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createContext, type AppContext } from '../src/app/context.ts';
import { loadConfig } from '../src/core/config.ts';
import { TransferBudget } from '../src/limiter/index.ts';
import { createLogger } from '../src/core/log.ts';
import { enqueueCsv } from '../src/queue/enqueue-csv.ts';
import { Durability } from '../src/redis/durability.ts';
import { redisTargetFrom, type RedisTarget } from '../src/core/redis-target.ts';
import { closeRedis, connectRedis, scanKeys, type RedisClient } from '../src/redis/client.ts';
import { createSimulator, type Simulator } from '../src/simulator/index.ts';
import { startWorkers } from '../src/worker/run-workers.ts';
import { spawnCli, waitExit } from '../test/helpers/cli.ts';
import { learnersNotIn, startHarness } from '../test/helpers/pipeline.ts';
import {
  startCluster,
  startSentinel,
  type RedisClusterHandle,
  type RedisSentinelHandle,
} from '../test/helpers/redis-ha.ts';
import { startOwnRedis, type OwnRedis } from '../test/helpers/redis-server.ts';
import { isMain, median, printFigures, round, type Figures } from './common.ts';

function envInt(name: string, fallback: number): number {
  const n = Number(process.env[name] ?? fallback);
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`${name}: expected a whole number >= 1`);
  return n;
}

/** Limiter: rounds over every configuration, ms per configuration and round, loops in parallel. */
const LIMITER_ROUNDS = envInt('BENCH_HA_ROUNDS', 3);
const LIMITER_MS = envInt('BENCH_HA_LIMITER_MS', 1500);
const LIMITER_LOOPS = 32;
/** Pipeline: transfers per configuration and round, rounds, worker concurrency. */
const TRANSFERS = envInt('BENCH_HA_TRANSFERS', 1000);
const PIPELINE_ROUNDS = envInt('BENCH_HA_PIPELINE_ROUNDS', 2);
const PIPELINE_CONCURRENCY = 20;
/** Failover: learners per topology; the master is killed once this share of them has moved. */
const FAILOVER_LEARNERS = envInt('BENCH_HA_FAILOVER_LEARNERS', 600);
const KILL_AFTER_SHARE = 0.25;
/** REDIS_WAIT_TIMEOUT as shipped (config.ts default). */
const WAIT_TIMEOUT_MS = 1000;

type TopologyName = 'standalone' | 'cluster' | 'sentinel';

interface Topologies {
  own: OwnRedis;
  cluster: RedisClusterHandle;
  sentinel: RedisSentinelHandle;
  /** The variables that select each topology (what an operator sets). */
  env: Record<TopologyName, Record<string, string>>;
  setupMs: number;
  stop(): Promise<void>;
}

async function startTopologies(): Promise<Topologies> {
  const started = performance.now();
  // Same binary and persistence settings as the cluster and Sentinel nodes (nothing on disk).
  const results = await Promise.allSettled([
    startOwnRedis(['--appendonly', 'no']),
    startCluster(),
    startSentinel(),
  ]);
  const [own, cluster, sentinel] = results.map((r) => (r.status === 'fulfilled' ? r.value : undefined)) as [
    OwnRedis | undefined,
    RedisClusterHandle | undefined,
    RedisSentinelHandle | undefined,
  ];
  const stop = async () => {
    await Promise.all([own?.close(), cluster?.stop(), sentinel?.stop()]);
  };
  const failed = results.find((r) => r.status === 'rejected');
  if (failed || !own || !cluster || !sentinel) {
    await stop();
    throw (failed as PromiseRejectedResult | undefined)?.reason ?? new Error('a topology did not start');
  }
  return {
    own,
    cluster,
    sentinel,
    // REDIS_URL is the standalone server in every mode: in cluster and Sentinel mode it must not be used,
    // and the end of the run checks that no key of theirs landed there.
    env: {
      standalone: { REDIS_URL: own.url },
      cluster: { REDIS_URL: own.url, REDIS_CLUSTER_NODES: cluster.seeds },
      sentinel: {
        REDIS_URL: own.url,
        REDIS_SENTINELS: sentinel.sentinels,
        REDIS_SENTINEL_MASTER: sentinel.masterName,
      },
    },
    setupMs: performance.now() - started,
    stop,
  };
}

function targetOf(env: Record<string, string>): RedisTarget {
  const problems: string[] = [];
  const target = redisTargetFrom({ REDIS_URL: env.REDIS_URL ?? '', ...env }, problems);
  if (!target) throw new Error(`bench: bad Redis environment: ${problems.join('; ')}`);
  return target;
}

/** The configurations in a rotated order per round, so none is always measured first or last. */
function rotated<T>(items: readonly T[], by: number): T[] {
  const k = by % items.length;
  return [...items.slice(k), ...items.slice(0, k)];
}

// ---------------------------------------------------------------------------------------------------------
// Limiter

interface LimiterConfig {
  label: string;
  topology: TopologyName;
  wait: boolean;
}

const LIMITER_CONFIGS: LimiterConfig[] = [
  { label: 'standalone', topology: 'standalone', wait: true },
  { label: 'cluster, no WAIT', topology: 'cluster', wait: false },
  { label: 'cluster, WAIT', topology: 'cluster', wait: true },
  { label: 'sentinel (master + replica), no WAIT', topology: 'sentinel', wait: false },
  { label: 'sentinel (master + replica), WAIT', topology: 'sentinel', wait: true },
];

/** acquire -> WAIT -> settle -> WAIT cycles per second from LIMITER_LOOPS loops, as a worker does them. */
async function cyclesPerSec(budget: TransferBudget, durability: Durability, ms: number): Promise<number> {
  const tokens = ['tok1', 'tok2'];
  const waitKey = budget.keys.outcomes('bench'); // the key the worker names: the org's slot
  let cycles = 0;
  const start = performance.now();
  const end = start + ms;
  await Promise.all(
    Array.from({ length: LIMITER_LOOPS }, async () => {
      while (performance.now() < end) {
        const p = await budget.acquire('bench', tokens);
        if (!p.ok) throw new Error(`bench: refused with the limits lifted (${p.scope})`);
        await durability.replicated(waitKey);
        await budget.settle('bench', p.tokenId, p.permitId);
        await durability.replicated(waitKey);
        cycles++;
      }
    }),
  );
  return cycles / ((performance.now() - start) / 1000);
}

export async function runLimiter(topos: Topologies): Promise<Figures> {
  const prefix = `lt-bha-${Date.now().toString(36)}-lim`;
  const clients = new Map<TopologyName, RedisClient>();
  for (const name of ['standalone', 'cluster', 'sentinel'] as const) {
    clients.set(name, await connectRedis(targetOf(topos.env[name]), { name: `bench-ha-${name}` }));
  }
  try {
    const runs = LIMITER_CONFIGS.map((c) => {
      const redis = clients.get(c.topology) as RedisClient;
      const budget = new TransferBudget(redis, {
        prefix: `${prefix}-${c.topology.slice(0, 4)}${c.wait ? 'w' : 'n'}`,
        limitPerToken: { max: 1e9, windowMs: 1000 },
        limitPerOrg: { max: 1e9, windowMs: 1000 },
        inflightTtlMs: 5000,
      });
      return {
        config: c,
        budget,
        durability: new Durability(redis, c.wait ? WAIT_TIMEOUT_MS : 0),
        rates: [] as number[],
      };
    });
    // Warm-up: scripts loaded, slots known, replica counts read.
    for (const r of runs) await cyclesPerSec(r.budget, r.durability, 200);
    for (const r of runs)
      Object.assign(r.durability.stats, { waits: 0, joined: 0, unacknowledged: 0, noReplica: 0 });
    for (let round = 0; round < LIMITER_ROUNDS; round++) {
      for (const r of rotated(runs, round))
        r.rates.push(await cyclesPerSec(r.budget, r.durability, LIMITER_MS));
    }
    const rate = (label: string) => median(runs.find((r) => r.config.label === label)?.rates ?? []);
    const base = rate('standalone');
    const figures: Figures = {
      'rounds x ms per configuration': `${LIMITER_ROUNDS} x ${LIMITER_MS}`,
    };
    for (const r of runs) {
      figures[`${r.config.label}: cycles/s (median)`] = Math.round(median(r.rates));
    }
    figures['cluster no WAIT / standalone'] = round(rate('cluster, no WAIT') / base, 3);
    figures['cluster WAIT / standalone (as shipped; goal >= 0.7)'] = round(rate('cluster, WAIT') / base, 3);
    figures['cluster WAIT / no WAIT'] = round(rate('cluster, WAIT') / rate('cluster, no WAIT'), 3);
    figures['sentinel no WAIT / standalone'] = round(rate('sentinel (master + replica), no WAIT') / base, 3);
    figures['sentinel WAIT / standalone (as shipped; goal >= 0.7)'] = round(
      rate('sentinel (master + replica), WAIT') / base,
      3,
    );
    figures['sentinel WAIT / no WAIT'] = round(
      rate('sentinel (master + replica), WAIT') / rate('sentinel (master + replica), no WAIT'),
      3,
    );
    const waits = runs.filter((r) => r.config.wait);
    figures['WAITs sent / joined / unacknowledged (standalone, cluster, sentinel)'] = waits
      .map(
        (r) =>
          `${r.durability.stats.waits}/${r.durability.stats.joined}/${r.durability.stats.unacknowledged}`,
      )
      .join(', ');
    return figures;
  } finally {
    for (const redis of clients.values()) await closeRedis(redis);
  }
}

// ---------------------------------------------------------------------------------------------------------
// Pipeline

interface PipelineConfig {
  label: string;
  topology: TopologyName;
  wait: boolean;
  ctx?: AppContext;
  ms: number[];
}

async function pipelineRun(ctx: AppContext, ids: number[], runId: string, dir: string): Promise<number> {
  const file = join(dir, `${runId}.csv`);
  writeFileSync(file, `learnerId\n${ids.join('\n')}\n`);
  await ctx.runs.create({ id: runId, kind: 'csv', source: file, orgs: ['acme'] });
  await enqueueCsv(
    { producer: ctx.producer, runs: ctx.runs },
    { file, defaultOrg: 'acme', knownOrgs: ctx.config.orgs, runId, rejectsFile: join(dir, `${runId}-r.csv`) },
  );
  const started = performance.now();
  const result = await startWorkers(ctx, {
    orgs: ['acme'],
    concurrency: PIPELINE_CONCURRENCY,
    untilIdle: true,
    idleCheckMs: 50,
    spool: true,
  }).done;
  const ms = performance.now() - started;
  if (result.succeeded !== ids.length) {
    throw new Error(`pipeline ${runId}: ${result.succeeded} of ${ids.length} succeeded`);
  }
  return ms;
}

export async function runPipeline(topos: Topologies): Promise<Figures> {
  const configs: PipelineConfig[] = [
    { label: 'standalone', topology: 'standalone', wait: true, ms: [] },
    { label: 'cluster, no WAIT', topology: 'cluster', wait: false, ms: [] },
    { label: 'cluster, WAIT', topology: 'cluster', wait: true, ms: [] },
    { label: 'sentinel, no WAIT', topology: 'sentinel', wait: false, ms: [] },
    { label: 'sentinel, WAIT', topology: 'sentinel', wait: true, ms: [] },
  ];
  const batches = configs.length * PIPELINE_ROUNDS;
  const warmPer = 20;
  const all = learnersNotIn('acme', TRANSFERS * batches + warmPer * configs.length);
  const movable = all.slice(0, TRANSFERS * batches);
  const warm = all.slice(TRANSFERS * batches);
  const sim: Simulator = createSimulator({ learners: (all.at(-1) ?? 0) + 1, repeatMode: 'error' });
  await sim.listen();
  const dir = mkdtempSync(join(tmpdir(), 'lt-bench-ha-'));
  const stamp = Date.now().toString(36);
  try {
    for (const c of configs) {
      const config = loadConfig(
        {
          ...topos.env[c.topology],
          QUEUE_PREFIX: `lt-bha-${stamp}-${c.topology.slice(0, 4)}${c.wait ? 'w' : 'n'}`,
          LEARNER_API_BASE_URL: sim.url,
          LEARNER_API_TOKENS: 'acme:sim-acme-1,acme:sim-acme-2',
          LIMIT_PER_TOKEN: '1000000/1s',
          LIMIT_PER_ORG: '1000000/1s',
          CONCURRENCY: String(PIPELINE_CONCURRENCY),
          REDIS_WAIT_TIMEOUT: `${WAIT_TIMEOUT_MS}ms`,
          SPOOL_DIR: join(dir, `spool-${c.topology}-${c.wait ? 'w' : 'n'}`),
        },
        { requireBaseUrl: true, requireTokens: true },
      );
      c.ctx = await createContext(config, { logger: createLogger({ level: 'error' }) });
      // What REDIS_WAIT_TIMEOUT=0 gives (WAIT off); set here because the variable does not take 0 yet.
      if (!c.wait) c.ctx.durability = new Durability(c.ctx.redis, 0);
    }
    // A short warm-up on each (scripts loaded, connections made), then interleaved rounds.
    for (const [i, c] of configs.entries()) {
      await pipelineRun(c.ctx as AppContext, warm.slice(i * warmPer, (i + 1) * warmPer), 'warm', dir);
    }
    let next = 0;
    for (let round = 0; round < PIPELINE_ROUNDS; round++) {
      for (const c of rotated(configs, round)) {
        const ids = movable.slice(next, next + TRANSFERS);
        next += TRANSFERS;
        c.ms.push(await pipelineRun(c.ctx as AppContext, ids, `bench-${round}`, dir));
      }
    }
    const perSec = (c: PipelineConfig) =>
      (TRANSFERS * c.ms.length) / (c.ms.reduce((a, b) => a + b, 0) / 1000);
    const rate = (label: string) => perSec(configs.find((c) => c.label === label) as PipelineConfig);
    const base = rate('standalone');
    const figures: Figures = {
      'transfers per configuration x rounds': `${TRANSFERS} x ${PIPELINE_ROUNDS}`,
      concurrency: PIPELINE_CONCURRENCY,
    };
    for (const c of configs) figures[`${c.label}: transfers/s`] = Math.round(perSec(c));
    figures['cluster no WAIT / standalone'] = round(rate('cluster, no WAIT') / base, 3);
    figures['cluster WAIT / standalone (as shipped; goal >= 0.7)'] = round(rate('cluster, WAIT') / base, 3);
    figures['cluster WAIT / no WAIT'] = round(rate('cluster, WAIT') / rate('cluster, no WAIT'), 3);
    figures['sentinel no WAIT / standalone'] = round(rate('sentinel, no WAIT') / base, 3);
    figures['sentinel WAIT / standalone (as shipped; goal >= 0.7)'] = round(rate('sentinel, WAIT') / base, 3);
    figures['sentinel WAIT / no WAIT'] = round(rate('sentinel, WAIT') / rate('sentinel, no WAIT'), 3);
    figures['WAITs sent / joined / unacknowledged (cluster, sentinel)'] = configs
      .filter((c) => c.wait && c.topology !== 'standalone')
      .map(
        (c) =>
          `${c.ctx?.durability.stats.waits ?? 0}/${c.ctx?.durability.stats.joined ?? 0}/${c.ctx?.durability.stats.unacknowledged ?? 0}`,
      )
      .join(', ');
    figures['learners not moved exactly once (must be 0)'] = movable
      .slice(0, next)
      .filter((id) => sim.ownerChanges(id) !== 1).length;
    return figures;
  } finally {
    for (const c of configs) await c.ctx?.close();
    await sim.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------------------
// Failover

interface Killable {
  /** SIGKILLs the master serving `key`; resolves with its port. */
  kill(key: string): Promise<number>;
  waitForFailover(port: number): Promise<{ newMasterPort: number; ms: number }>;
  waitForReplication(): Promise<void>;
}

/** The kill and the waits of one topology, the same for a cluster (by key) and a Sentinel setup. */
function killableOf(topos: Topologies, mode: 'cluster' | 'sentinel'): Killable {
  return mode === 'cluster'
    ? {
        async kill(key) {
          const port = await topos.cluster.masterOf(key);
          await topos.cluster.killNode(port);
          return port;
        },
        waitForFailover: (port) => topos.cluster.waitForFailover(port),
        waitForReplication: () => topos.cluster.waitForReplication(),
      }
    : {
        kill: () => topos.sentinel.killMaster(),
        waitForFailover: (port) => topos.sentinel.waitForFailover(port),
        waitForReplication: () => topos.sentinel.waitForReplication(),
      };
}

/** The longest gap between consecutive points, the kill first: its length and the point that ends it. */
function longestGap(killedAt: number, arrivals: number[]): { gap: number; gapEnd: number } {
  const points = [killedAt, ...arrivals];
  let gap = 0;
  let gapEnd = killedAt;
  for (let i = 1; i < points.length; i++) {
    const d = (points[i] ?? 0) - (points[i - 1] ?? 0);
    if (d > gap) {
      gap = d;
      gapEnd = points[i] ?? 0;
    }
  }
  return { gap, gapEnd };
}

/** A harness on `mode`'s Redis whose service answers in 5-30 ms and 429 to anything over the budget. */
function failoverHarness(topos: Topologies, mode: 'cluster' | 'sentinel', ids: number[]) {
  return startHarness({
    tag: `bha-${mode}`,
    redisEnv: topos.env[mode],
    sim: {
      learners: (ids.at(-1) ?? 0) + 1,
      tokens: [
        { token: 'sim-acme-1', org: 'acme' },
        { token: 'sim-acme-2', org: 'acme' },
      ],
      // Calls are in flight at the kill; the service answers 429 to anything over the budget.
      faults: { latencyAfterMs: [5, 30] },
      limits: {
        perToken: { max: 40, windowMs: 1000 },
        perOrg: { max: 80, windowMs: 1000 },
        window: 'rolling',
      },
    },
    env: {
      LIMIT_PER_TOKEN: '40/1s',
      LIMIT_PER_ORG: '80/1s',
      ATTEMPTS: '4',
      LOG_LEVEL: process.env.BENCH_HA_LOG_LEVEL ?? 'warn',
    },
  });
}

/**
 * Two `work` processes on `mode`, the master serving the organization's keys SIGKILLed once a quarter of
 * the learners moved. The stall is read from the simulator's record: transfer requests (PATCH) in the
 * order they arrived from the kill on, with the kill itself as the first point; the longest gap between
 * two consecutive points is the stall, and the request that ends it is the first after the stall.
 */
export async function runFailover(topos: Topologies, mode: 'cluster' | 'sentinel'): Promise<Figures> {
  const topo = killableOf(topos, mode);
  const ids = learnersNotIn('acme', FAILOVER_LEARNERS);
  const h = await failoverHarness(topos, mode, ids);
  try {
    const { summary } = await h.enqueueIds(ids, 'acme');
    if (summary.enqueued !== ids.length)
      throw new Error(`failover: enqueued ${summary.enqueued} of ${ids.length}`);
    await topo.waitForReplication();
    const idSet = new Set(ids);
    const patches = () => h.sim.record.filter((r) => r.method === 'PATCH' && idSet.has(r.learnerId ?? -1));
    const moved = () => patches().filter((r) => r.effectApplied).length;
    const workers = [
      spawnCli(['work', '--until-idle', '--concurrency', '6'], h.env),
      spawnCli(['work', '--until-idle', '--concurrency', '6'], h.env),
    ];
    const started = Date.now();
    const killAfter = Math.ceil(ids.length * KILL_AFTER_SHARE);
    while (moved() < killAfter && Date.now() - started < 60_000) await sleep(20);
    const movedBeforeKill = moved();
    const port = await topo.kill(h.ctx.keys.outcomes('acme'));
    const failover = await topo.waitForFailover(port);
    // The harness measured from the kill itself (the process's SIGKILL) to now.
    const killedAt = Date.now() - failover.ms;
    const done = await Promise.all(
      workers.map((w, i) =>
        waitExit(w, 120_000).catch((err: unknown) => {
          // The whole log of a worker that did not finish, for the diagnosis.
          const file = join(tmpdir(), `lt-bench-ha-${mode}-worker-${i + 1}.log`);
          writeFileSync(file, w.output.stderr);
          w.kill('SIGKILL');
          throw new Error(`${(err as Error).message.split('\n')[0]} (its log: ${file})`);
        }),
      ),
    );
    const wallS = (Date.now() - started) / 1000;

    const arrivals = patches()
      .map((r) => r.receivedAt)
      .filter((t) => t >= killedAt)
      .sort((a, b) => a - b);
    const { gap, gapEnd } = longestGap(killedAt, arrivals);
    const perLearner = new Map<number, number>();
    for (const r of patches())
      perLearner.set(r.learnerId ?? -1, (perLearner.get(r.learnerId ?? -1) ?? 0) + 1);
    const records = await h.ctx.store.getMany('acme', ids);
    const notDone = records.filter((r) => r?.b !== 'transferred' && r?.b !== 'already-in-org').length;
    return {
      learners: ids.length,
      'limits (service and workers)': '40/1s per token x 2, 80/1s per org',
      'transfers before the kill': movedBeforeKill,
      'failover s (kill -> new master serving, harness)': round(failover.ms / 1000, 2),
      'requests in flight/arriving before the stall': arrivals.filter((t) => t < gapEnd).length,
      'longest gap in transfer arrivals after the kill s': round(gap / 1000, 2),
      'kill -> first request after that gap s': round((gapEnd - killedAt) / 1000, 2),
      'failover done -> first request after the gap s': round((gapEnd - killedAt - failover.ms) / 1000, 2),
      'transfers after the gap': arrivals.filter((t) => t >= gapEnd).length,
      'learners with > 1 transfer request': [...perLearner.values()].filter((n) => n > 1).length,
      'learners with > 1 recorded attempt': records.filter((r) => (r?.a ?? 0) > 1).length,
      'learners not transferred (must be 0)': notDone,
      'learners not moved exactly once (must be 0)': ids.filter((id) => h.sim.ownerChanges(id) !== 1).length,
      '429 answers (must be 0)': h.sim.record.filter((r) => r.status === 429).length,
      'overlapping calls (must be 0)': h.sim.overlaps().length,
      'worker exit codes': done.map((d) => d.code).join(' '),
      'run wall time s': round(wallS, 1),
    };
  } finally {
    await h.close();
  }
}

// ---------------------------------------------------------------------------------------------------------

/** Keys of the cluster and Sentinel runs found on the standalone server (REDIS_URL): must be none. */
async function strayKeys(own: OwnRedis): Promise<number> {
  const redis = await connectRedis(targetOf({ REDIS_URL: own.url }));
  try {
    let n = 0;
    for (const pattern of ['lt-bha-*-clus*', 'lt-bha-*-sent*', 'lt-test-bha-*']) {
      for await (const keys of scanKeys(redis, pattern)) n += keys.length;
    }
    return n;
  } finally {
    await closeRedis(redis);
  }
}

const MUST_BE_ZERO = /must be 0/;

/**
 * Every part in one run; `onPart` sees each part's figures as soon as it is done (a later part that fails
 * does not hide them). The setup part is completed last (stray keys, wall time).
 */
export async function runHaBench(
  only = process.env.BENCH_HA_ONLY?.split(',').map((s) => s.trim()),
  onPart: (title: string, figures: Figures) => void = () => {},
): Promise<{ title: string; figures: Figures }[]> {
  const wants = (part: string) => !only || only.includes(part);
  const started = performance.now();
  const topos = await startTopologies();
  const parts: { title: string; figures: Figures }[] = [];
  const out = {
    push(part: { title: string; figures: Figures }) {
      parts.push(part);
      if (part.title !== 'setup') onPart(part.title, part.figures);
    },
  };
  try {
    const setup: Figures = {
      'topologies up s (standalone, 3+3 cluster, sentinel 1+1+3, in parallel)': round(
        topos.setupMs / 1000,
        1,
      ),
    };
    out.push({ title: 'setup', figures: setup });
    if (wants('limiter')) {
      out.push({
        title: 'limiter acquire+settle, limits lifted (same run)',
        figures: await runLimiter(topos),
      });
    }
    if (wants('pipeline')) {
      out.push({ title: 'pipeline, limits lifted (same run)', figures: await runPipeline(topos) });
    }
    if (wants('failover')) {
      out.push({ title: 'failover on the cluster', figures: await runFailover(topos, 'cluster') });
      out.push({ title: 'failover on Sentinel', figures: await runFailover(topos, 'sentinel') });
    }
    setup['keys of cluster/Sentinel runs on REDIS_URL (must be 0)'] = await strayKeys(topos.own);
    setup['(bench wall time s)'] = round((performance.now() - started) / 1000, 1);
    onPart('setup', setup);
    return parts;
  } finally {
    await topos.stop();
  }
}

if (isMain(import.meta.url)) {
  const results = await runHaBench(undefined, printFigures);
  const bad = results.flatMap((r) =>
    Object.entries(r.figures).filter(([k, v]) => MUST_BE_ZERO.test(k) && v !== 0),
  );
  if (bad.length > 0) {
    console.error(`bench:ha: ${bad.map(([k, v]) => `${k} = ${v}`).join('; ')}`);
    process.exitCode = 1;
  }
}
