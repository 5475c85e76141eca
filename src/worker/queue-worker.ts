// One BullMQ Worker for one organization's queue, and what it does with its events.
import { Worker, type Job, type Telemetry } from 'bullmq';
import type { AppContext } from '../app/context.ts';
import { scrubSecrets } from '../core/log.ts';
import { queueTelemetry } from '../core/tracing.ts';
import type { LogThrottle } from '../core/log-throttle.ts';
import { isFinalBucket, type Bucket } from '../outcomes/record.ts';
import { transferJobSchema, type TransferJob } from '../queue/job.ts';
import type { RedisClient } from '../redis/client.ts';
import { permissionDenial, permissionSentence, redisUser } from '../redis/permission-denial.ts';
import type { WriteGate } from '../redis/writes.ts';
import { pauseOnPermissionError, PERMISSION_RETRY_MS } from './permission-pause.ts';
import type { ProcessResult } from './processor-context.ts';
import type { WriteGateLike } from './recorder.ts';
import type { WorkOptions } from './work-options.ts';

export interface QueueWorkerDeps {
  processor: (job: Job<TransferJob>, token?: string) => Promise<ProcessResult>;
  connection: RedisClient;
  options: WorkOptions;
  gate: WriteGateLike;
  /** This process's own write gate, when it has one (it resumes the workers itself). */
  ownGate: WriteGate | undefined;
  errors: LogThrottle;
  /** Records of jobs that BullMQ failed on its own, still being written. */
  pending: Set<Promise<void>>;
  counts: { failed: number };
}

/**
 * The worker of one organization's queue, not running yet (lanes.ts runs it while the organization has
 * work and budget). `track` wraps each job (the dispatcher counts the jobs in hand); dispose() after close.
 */
export function queueWorker(
  ctx: AppContext,
  org: string,
  deps: QueueWorkerDeps,
  track: <T>(run: () => Promise<T>) => Promise<T> = (run) => run(),
): { worker: Worker; dispose(): void } {
  const { options } = deps;
  const w = new Worker<TransferJob, ProcessResult>(
    ctx.keys.queueName(org),
    (job: Job<TransferJob>, token) => track(() => deps.processor(job, token)),
    {
      connection: deps.connection,
      prefix: ctx.keys.prefix,
      // BullMQ names the worker's blocking connection after it (`PREFIX:QUEUE:w:PID`): CLIENT LIST tells
      // which process holds it.
      name: String(process.pid),
      concurrency: options.concurrency,
      lockDuration: options.lockDurationMs ?? 30_000,
      stalledInterval: options.stalledIntervalMs ?? options.lockDurationMs ?? 30_000,
      // A learner whose worker was killed comes back; many kills in a row must not fail it.
      maxStalledCount: 20,
      // A wait for budget is one sleep, however long (BullMQ caps it at 30 s by default, which would
      // wake every worker twice a minute through a day-long wait). close() cuts the sleep short.
      maximumRateLimitDelay: 86_400_000,
      // Run by the dispatcher once attached (after the spools of earlier processes are replayed).
      autorun: false,
      // Tracing on: each job's process span continues the trace of its enqueue (docs/tracing.md).
      telemetry: queueTelemetry<Telemetry>(),
    },
  );
  const permissionPause = onQueueWorkerEvents(ctx, org, w, deps);
  return { worker: w, dispose: () => permissionPause.stop() };
}

function onQueueWorkerEvents(
  ctx: AppContext,
  org: string,
  w: Worker<TransferJob, ProcessResult>,
  deps: QueueWorkerDeps,
): { stop(): void } {
  const { errors, pending, counts } = deps;
  w.on('error', (err) => {
    deps.gate.noteError(err);
    // A refusal by Redis's ACL is said by the permission pause below, with the rule to grant.
    if (!permissionDenial(err)) errors.warn({ org, err: err.message }, 'worker error');
  });
  const permissionPause = pauseOnPermissionError(w, {
    onDenied: (err, denial) =>
      errors.log(
        'error',
        { org, err: err.message },
        `${permissionSentence(redisUser(ctx.config.redis), [denial], ctx.keys.prefix)}; ` +
          `the worker tries again every ${PERMISSION_RETRY_MS / 1000} s`,
      ),
    // The write gate may hold the workers too: it resumes them itself when Redis takes writes again.
    mayResume: () => deps.ownGate?.state.writable ?? true,
  });
  w.on('failed', (job, err) => {
    if (!job) return;
    const p = finalizeStranded(ctx, job, err)
      .then((finalized) => {
        if (finalized) counts.failed++;
      })
      .catch((e: Error) =>
        ctx.logger.warn({ org, jobId: job.id, err: e.message }, 'could not record a failed job'),
      )
      .finally(() => pending.delete(p));
    pending.add(p);
  });
  return permissionPause;
}

/**
 * A job BullMQ failed on its own (stalled too often, or an unclassified error until its attempts ran
 * out) would leave its learner waiting with no job: it gets `worker-error`. Returns true when it did.
 */
async function finalizeStranded(ctx: AppContext, job: Job<TransferJob>, err: Error): Promise<boolean> {
  const parsed = transferJobSchema.safeParse(job.data);
  if (!parsed.success) return false;
  if ((await job.getState()) !== 'failed') return false; // it will be retried
  const { org, learnerId, runId } = parsed.data;
  const record = await ctx.store.get(org, learnerId);
  if (record && isFinalBucket(record.b as Bucket)) return false; // the processor recorded it
  const secrets = ctx.tokens.secrets();
  await ctx.store.recordAttempt(org, learnerId, runId, {
    bucket: 'worker-error',
    code: 'worker-error',
    error: 'worker',
    message: scrubSecrets(`the worker could not finish this job: ${err.message}`, secrets).slice(0, 1000),
    durationMs: 0,
    countsAsAttempt: false,
  });
  ctx.logger.error(
    { org, learnerId, runId, reason: err.message },
    'job failed in the worker: learner marked worker-error',
  );
  return true;
}
