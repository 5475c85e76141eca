// `work`: one BullMQ Worker per organization queue in this process, sharing one limiter and one client.
// Any number of such processes on any hosts share the queues and the budget through Redis. This file wires
// the parts (write gate, recorder, processor, queue workers); work-session.ts runs them until they stop.
import type { Worker } from 'bullmq';
import type { LearnerApiClient } from '../api/client.ts';
import type { AppContext } from '../app/context.ts';
import { isSuccessBucket } from '../outcomes/record.ts';
import { createProcessor } from './processor.ts';
import { createRedis } from '../redis/client.ts';
import { countHourly } from '../outcomes/hourly.ts';
import { Recorder, type WriteGateLike } from './recorder.ts';
import { BodyArchive } from './body-archive.ts';
import { LogThrottle } from '../core/log-throttle.ts';
import { WriteGate } from '../redis/writes.ts';
import { LearnerTransferError } from '../core/errors.ts';
import { queueWorker } from './queue-worker.ts';
import type { WorkOptions, WorkResult } from './work-options.ts';
import { WorkSession } from './work-session.ts';

export type { WorkOptions, WorkResult } from './work-options.ts';

export interface WorkHandle {
  /** Resolves when the workers stop (idle, stop(), or every remaining org blocked by 401). */
  done: Promise<WorkResult>;
  /** The write gate's state (Redis takes writes?), for metrics. */
  writeState(): import('../redis/writes.ts').WriteState | undefined;
  stop(): Promise<void>;
  workers: Worker[];
}

type Gate = WriteGateLike & { waitOpen(): Promise<void> };

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
    waitOpen: () => ownGate?.waitOpen(gateAbort.signal) ?? Promise.resolve(),
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
    logger: ctx.logger,
    // Unreadable bodies are kept whole beside the spool, on the same persistent disk.
    ...(options.spool !== false ? { archive: new BodyArchive(ctx.config.spoolDir) } : {}),
    onOutcome: (e) => {
      countHourly(ctx.redis, ctx.keys, e.org, e.code).catch((err: Error) =>
        ctx.logger.warn({ err: err.message }, 'hourly count failed'),
      );
      if (e.final) {
        if (isSuccessBucket(e.bucket)) counts.succeeded++;
        else counts.failed++;
      }
      runsServed.add(e.runId);
      options.onOutcome?.(e);
    },
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
  const processor = transferProcessor(ctx, options, {
    client: ctx.client,
    recorder,
    gate,
    replicated,
    counts,
    runsServed,
  });
  // BullMQ workers block on their own connection; one shared connection for their normal commands.
  const connection = createRedis(ctx.config.redis, 'learner-transfer-worker');
  // While Redis is down every worker reports the same error many times a second: log it as one.
  const errors = new LogThrottle(ctx.logger);
  connection.on('error', (err) => errors.warn({ err: err.message }, 'worker redis connection error'));
  const permissionPauses: { stop(): void }[] = [];
  /** Records of jobs that BullMQ failed on its own, still being written. */
  const pending = new Set<Promise<void>>();
  const workers = options.orgs.map((org) =>
    queueWorker(ctx, org, {
      processor,
      connection,
      options,
      gate,
      ownGate,
      errors,
      permissionPauses,
      pending,
      counts,
    }),
  );
  const session = new WorkSession({
    ctx,
    options,
    ownGate,
    gateAbort,
    recorder,
    connection,
    errors,
    workers,
    permissionPauses,
    pending,
    counts,
    runsServed,
  });
  return { done: session.done, stop: () => session.stop(), workers, writeState: () => ownGate?.state };
}
