// Serves the control queue (queue/control.ts) inside `work`: scheduled reconciles, one at a time.
import { basename } from 'node:path';
import { UnrecoverableError, Worker, type Job } from 'bullmq';
import { liveSecrets, type AppContext } from '../app/context.ts';
import { scrubError, secretScrubber } from '../core/log.ts';
import { fixedSecretsOf } from '../core/config.ts';
import { controlJobSchema, resolveScheduleFile, type ControlJob } from '../queue/control.ts';
import type { ReconcileSummary } from '../queue/sources/reconcile.ts';
import { closeRedis, createRedis, type RedisClient } from '../redis/client.ts';
import { LogThrottle } from '../core/log-throttle.ts';
import { permissionDenial, permissionSentence, redisUser } from '../redis/permission-denial.ts';
import { pauseOnPermissionError, PERMISSION_RETRY_MS } from './permission-pause.ts';

export interface ControlResult {
  runId: string | null;
  enqueued: number;
  wrongOrg: number;
  notFound: number;
}

export interface ControlHandle {
  worker: Worker<ControlJob, ControlResult>;
  close(): Promise<void>;
}

export interface ControlWorkerOptions {
  onRun?: (summary: ReconcileSummary) => void;
}

/** One scheduled reconcile: the job read, its file found inside SCHEDULE_DIR, the reconcile run. */
async function runScheduledReconcile(
  ctx: AppContext,
  options: ControlWorkerOptions,
  job: Job<ControlJob>,
): Promise<ControlResult> {
  const parsed = controlJobSchema.safeParse(job.data);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new UnrecoverableError(
      `malformed control job ${job.id}: ${issue ? `${issue.path.join('.') || '(root)'}: ${issue.message}` : 'invalid data'}`,
    );
  }
  const data = parsed.data;
  // Only a file inside SCHEDULE_DIR (symlinks resolved) is read: anyone who can write a job to Redis
  // must not make a worker read /etc/passwd or an env file into a run or an error.
  let file: string;
  try {
    file = await resolveScheduleFile(ctx.config.scheduleDir, data.desired);
  } catch (err) {
    throw new UnrecoverableError(`schedule ${data.scheduleId}: ${(err as Error).message}`);
  }
  ctx.logger.info({ schedule: data.scheduleId, desired: file }, 'scheduled reconcile starting');
  // Loaded at the first scheduled reconcile: a work process that never runs one (most) starts without it.
  const { runReconcile } = await import('../ops/intake/reconcile.ts');
  const summary = await runReconcile(ctx, {
    file,
    defaultOrg: data.defaultOrg,
    orgIds: data.orgIds,
    sourceLabel: `schedule ${data.scheduleId}: reconcile ${basename(data.desired)}`,
    // Its errors go to Redis: they name the file, the line and the problem, never the file's cells.
    quoteCells: false,
  });
  ctx.logger.info(
    {
      schedule: data.scheduleId,
      runId: summary.runId,
      enqueued: summary.enqueued,
      wrongOrg: summary.wrongOrg,
      notFound: summary.notFound,
      driftReport: summary.driftFile,
    },
    // No drift: no run and no report (src/queue/sources/reconcile.ts).
    summary.driftFile
      ? 'scheduled reconcile done: drift report written'
      : 'scheduled reconcile done: no drift',
  );
  options.onRun?.(summary);
  return {
    runId: summary.runId,
    enqueued: summary.enqueued,
    wrongOrg: summary.wrongOrg,
    notFound: summary.notFound,
  };
}

/**
 * The control queue's worker on `connection`, not running yet: the dispatcher of `work` runs it while a
 * scheduled job is due (lanes.ts), startControlWorker on its own. dispose() after close.
 */
export function controlWorker(
  ctx: AppContext,
  connection: RedisClient,
  errors: LogThrottle,
  options: ControlWorkerOptions = {},
  track: <T>(run: () => Promise<T>) => Promise<T> = (run) => run(),
): { worker: Worker<ControlJob, ControlResult>; dispose(): void } {
  // BullMQ keeps a failed job's message (failedReason) and stack (stacktrace) in Redis, and the list
  // call's errors may quote the service: only scrubbed errors leave the processor.
  const scrub = secretScrubber(
    liveSecrets(ctx.tokens, ctx.config.dashboardToken, fixedSecretsOf(ctx.config)),
  );
  const worker = new Worker<ControlJob, ControlResult>(
    ctx.keys.controlQueueName(),
    (job: Job<ControlJob>) =>
      track(async () => {
        try {
          return await runScheduledReconcile(ctx, options, job);
        } catch (err) {
          throw scrubError(err, scrub);
        }
      }),
    { connection, prefix: ctx.keys.prefix, name: String(process.pid), concurrency: 1, autorun: false },
  );
  worker.on('failed', (job, err) =>
    ctx.logger.error({ schedule: job?.data.scheduleId, err: err.message }, 'scheduled reconcile failed'),
  );
  worker.on('error', (err) => {
    if (!permissionDenial(err)) errors.warn({ err: err.message }, 'control worker error');
  });
  // A rule revoked while it runs: the worker waits and tries again instead of spinning.
  const permissionPause = pauseOnPermissionError(worker, {
    onDenied: (err, denial) =>
      errors.log(
        'error',
        { err: err.message },
        `${permissionSentence(redisUser(ctx.config.redis), [denial], ctx.keys.prefix)}; ` +
          `the control worker tries again every ${PERMISSION_RETRY_MS / 1000} s`,
      ),
  });
  return { worker, dispose: () => permissionPause.stop() };
}

export function startControlWorker(ctx: AppContext, options: ControlWorkerOptions = {}): ControlHandle {
  const connection = createRedis(ctx.config.redis, 'learner-transfer-control');
  // A Redis that refuses writes makes BullMQ's loop fail many times a second: one line per interval.
  const errors = new LogThrottle(ctx.logger);
  connection.on('error', (err) => errors.warn({ err: err.message }, 'control redis connection error'));
  const { worker, dispose } = controlWorker(ctx, connection, errors, options);
  worker.run().catch((err: Error) => errors.warn({ err: err.message }, 'control worker error'));
  return {
    worker,
    async close() {
      dispose();
      await worker.close();
      await closeRedis(connection);
      errors.stop();
    },
  };
}
