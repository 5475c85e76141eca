// `work`: wires this process's parts (write gate, recorder, processor, dispatcher); work-session.ts runs
// them until they stop.
import type { Worker } from 'bullmq';
import type { LearnerApiClient } from '../api/client.ts';
import type { AppContext } from '../app/context.ts';
import { isSuccessBucket } from '../outcomes/record.ts';
import { createProcessor } from './processor.ts';
import { autoApprove, DEFAULT_HALT_AT } from '../ops/actions/canary.ts';
import { createRedis, type RedisClient } from '../redis/client.ts';
import { countHourly } from '../outcomes/hourly.ts';
import { Recorder, type WriteGateLike } from './recorder.ts';
import { BodyArchive } from './body-archive.ts';
import { LogThrottle } from '../core/log-throttle.ts';
import { WriteGate } from '../redis/writes.ts';
import { LearnerTransferError } from '../core/errors.ts';
import { queueWorker, type QueueWorkerDeps } from './queue-worker.ts';
import { controlWorker } from './control-worker.ts';
import { LaneDispatcher } from './lanes.ts';
import { CONTROL_LANE, LanesDue } from '../queue/lanes-due.ts';
import { laneJobs, type LaneJobs } from '../queue/lane-state.ts';
import { closeWorker } from './close-worker.ts';
import type { WorkOptions, WorkResult } from './work-options.ts';
import { WorkSession } from './work-session.ts';

export type { WorkOptions, WorkResult } from './work-options.ts';

export interface WorkHandle {
  /** Resolves when the workers stop (idle, stop(), or every remaining org blocked by 401). */
  done: Promise<WorkResult>;
  /** The write gate's state (Redis takes writes?), for metrics. */
  writeState(): import('../redis/writes.ts').WriteState | undefined;
  /** This process's spool: entries not yet in Redis and when the oldest was written, for metrics. */
  spoolState(): { entries: number; oldestAt: number | null };
  stop(): Promise<void>;
  /** The queue workers attached now. */
  readonly workers: Worker[];
  lanes: LaneDispatcher;
}

/** Connections every `work` process holds whatever it does. */
export const FIXED_CONNECTIONS = 3;

type Gate = WriteGateLike & { waitOpen(signal?: AbortSignal): Promise<void> };

/** Send nothing that cannot be recorded: the gate closes on a refused write or above the high-water mark. */
function writeGateFor(
  ctx: AppContext,
  options: WorkOptions,
): { ownGate: WriteGate | undefined; gateAbort: AbortController; gate: Gate } {
  const ownGate = options.gate
    ? undefined
    : new WriteGate(ctx.redis, {
        probeKey: ctx.keys.writeProbe(),
        highWater: ctx.config.redisHighWater,
        logger: ctx.logger,
      });
  const gateAbort = new AbortController();
  const gate = options.gate ?? {
    noteError: (err: unknown) => ownGate?.noteError(err) ?? false,
    get isOpen() {
      return ownGate?.isOpen ?? true;
    },
    waitOpen: (signal?: AbortSignal) => ownGate?.waitOpen(signal ?? gateAbort.signal) ?? Promise.resolve(),
  };
  return { ownGate, gateAbort, gate };
}

/** The transfer processor of this process, counting the outcomes it records. */
function transferProcessor(
  ctx: AppContext,
  options: WorkOptions,
  parts: {
    client: LearnerApiClient;
    recorder: Recorder;
    gate: Gate;
    replicated: (org: string) => Promise<unknown>;
    counts: { succeeded: number; failed: number };
    runsServed: Set<string>;
    onBudgetWait: (org: string, waitMs: number, indefinite: boolean, askedAtMs: number) => boolean;
  },
) {
  const { gate, counts, runsServed } = parts;
  return createProcessor({
    config: ctx.config,
    tokens: ctx.tokens,
    client: parts.client,
    budget: ctx.budget,
    store: ctx.store,
    claims: ctx.claims,
    keys: ctx.keys,
    queues: ctx.queues,
    recorder: parts.recorder,
    ...(gate ? { waitWritable: () => gate.waitOpen() } : {}),
    replicated: parts.replicated,
    onBudgetWait: parts.onBudgetWait,
    ...(options.onRefused ? { onRefused: options.onRefused } : {}),
    ...(options.onHalt ? { onHalt: options.onHalt } : {}),
    logger: ctx.logger,
    // Unreadable bodies are kept whole beside the spool, on the same persistent disk.
    ...(options.spool !== false ? { archive: new BodyArchive(ctx.config.spoolDir) } : {}),
    onCanaryFinal: (org, runId) => autoApprove(ctx, org, runId, options.canaryHaltShare ?? DEFAULT_HALT_AT),
    onOutcome: (e) => {
      countHourly(
        ctx.redis,
        ctx.keys,
        e.org,
        e.code,
        Date.now(),
        e.final ? { finalByRun: { [e.runId]: 1 } } : {},
      ).catch((err: Error) => ctx.logger.warn({ err: err.message }, 'hourly count failed'));
      if (e.final) {
        if (isSuccessBucket(e.bucket)) counts.succeeded++;
        else counts.failed++;
      }
      runsServed.add(e.runId);
      options.onOutcome?.(e);
    },
  });
}

/** The dispatcher of this process's lanes (lanes.ts). */
function laneDispatcher(
  ctx: AppContext,
  options: WorkOptions,
  parts: { deps: QueueWorkerDeps; served: string[]; subscriber: RedisClient; ownGate: WriteGate | undefined },
): LaneDispatcher {
  const { deps, ownGate } = parts;
  const lanes: LaneDispatcher = new LaneDispatcher({
    due: new LanesDue(ctx.redis, ctx.keys),
    lanes: parts.served,
    maxAttached: Math.max(1, ctx.config.redisMaxConnections - FIXED_CONNECTIONS),
    createWorker: (lane, track) =>
      lane === CONTROL_LANE
        ? controlWorker(ctx, deps.connection, deps.errors, options.control || {}, track)
        : queueWorker(ctx, lane, deps, track),
    queueState: async (lane) => (await laneJobs(ctx.redis, ctx.keys, [lane]))[0] as LaneJobs,
    closeWorker: (w) => closeWorker(ctx, w),
    subscriber: parts.subscriber,
    lanesChannel: ctx.keys.lanesChannel(),
    limiterChannel: (org) => ctx.keys.limiterEvents(org),
    logger: ctx.logger,
    stalledIntervalMs: options.stalledIntervalMs ?? options.lockDurationMs ?? 30_000,
    mayAttach: () => ownGate?.state.writable ?? true,
    ...(options.lanes ?? {}),
    onChange: (e) => {
      // An idle process checks Redis's writes rarely; one with workers attached, every poll.
      ownGate?.setIdle(lanes.attachedLanes.length === 0);
      options.lanes?.onChange?.(e);
    },
  });
  return lanes;
}

/**
 * Tokens changed (the token file read again): organizations added are served, those left without a token
 * detached, and those whose tokens changed woken (a rotated token may free a lane blocked by a 401).
 */
function followTokens(ctx: AppContext, options: WorkOptions, lanes: LaneDispatcher): () => void {
  return ctx.tokens.onChange((change) => {
    if (change.orgsAdded.length > 0 || change.orgsRemoved.length > 0) {
      lanes.setLanes([...ctx.tokens.orgs(), ...(options.control ? [CONTROL_LANE] : [])]);
    }
    lanes.wake(change.orgsChanged);
  });
}

export function startWorkers(ctx: AppContext, options: WorkOptions): WorkHandle {
  if (!ctx.client)
    throw new LearnerTransferError('LT_CONFIG_INVALID', 'startWorkers needs LEARNER_API_BASE_URL');
  const counts = { succeeded: 0, failed: 0 };
  const runsServed = new Set<string>();
  const { ownGate, gateAbort, gate } = writeGateFor(ctx, options);
  const replicated = (org: string) => ctx.durability.replicated(ctx.keys.outcomes(org));
  const recorder = new Recorder({
    store: ctx.store,
    logger: ctx.logger,
    replicated,
    ...(gate ? { gate } : {}),
  });
  // The dispatcher is built below; the processor tells it when an organization's budget is spent.
  const late: { lanes?: LaneDispatcher } = {};
  const processor = transferProcessor(ctx, options, {
    client: ctx.client,
    recorder,
    gate,
    replicated,
    counts,
    runsServed,
    onBudgetWait: (org, waitMs, indefinite, askedAtMs) =>
      late.lanes?.budgetWait(org, waitMs, indefinite, askedAtMs) ?? false,
  });
  // Every attached worker shares this connection for its normal commands; each holds one blocking
  // connection of its own while attached. The subscriber hears the nudges. With ctx.redis, these are the
  // three connections a process always holds (REDIS_MAX_CONNECTIONS counts them).
  const connection = createRedis(ctx.config.redis, `learner-transfer-worker:${process.pid}`);
  const subscriber = createRedis(ctx.config.redis, `learner-transfer-lanes:${process.pid}`);
  // While Redis is down every worker reports the same error many times a second: log it as one.
  const errors = new LogThrottle(ctx.logger);
  connection.on('error', (err) => errors.warn({ err: err.message }, 'worker redis connection error'));
  subscriber.on('error', (err) => errors.warn({ err: err.message }, 'lanes redis connection error'));
  /** Records of jobs that BullMQ failed on its own, still being written. */
  const pending = new Set<Promise<void>>();
  const deps = { processor, connection, options, gate, ownGate, errors, pending, counts };
  const served = [...options.orgs, ...(options.control ? [CONTROL_LANE] : [])];
  const lanes = laneDispatcher(ctx, options, { deps, served, subscriber, ownGate });
  late.lanes = lanes;
  const offTokens = options.followTokens ? followTokens(ctx, options, lanes) : undefined;
  const session = new WorkSession({
    ctx,
    options,
    ownGate,
    gateAbort,
    recorder,
    connection,
    subscriber,
    errors,
    lanes,
    served,
    pending,
    counts,
    runsServed,
  });
  void session.done.then(() => offTokens?.());
  return {
    done: session.done,
    stop: () => session.stop(),
    get workers() {
      return lanes.workers;
    },
    lanes,
    writeState: () => ownGate?.state,
    spoolState: () => session.spoolState(),
  };
}
