// Serves the control queue (queue/control.ts) inside `work`: a scheduled reconcile runs here, in
// whichever worker process BullMQ hands it to, one at a time per process.
import { basename } from 'node:path';
import { Worker, type Job } from 'bullmq';
import type { AppContext } from '../app.ts';
import { controlJobSchema, type ControlJob } from '../queue/control.ts';
import { runReconcile } from '../queue/reconcile-run.ts';
import type { ReconcileSummary } from '../queue/sources/reconcile.ts';
import { closeRedis, createRedis } from '../redis.ts';
import { LogThrottle } from '../log-throttle.ts';

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

export function startControlWorker(
  ctx: AppContext,
  options: { onRun?: (summary: ReconcileSummary) => void } = {},
): ControlHandle {
  const connection = createRedis(ctx.config.redisUrl, 'learner-transfer-control');
  // A Redis that refuses writes makes BullMQ's loop fail many times a second: one line per interval.
  const errors = new LogThrottle(ctx.logger);
  connection.on('error', (err) => errors.warn({ err: err.message }, 'control redis connection error'));
  const worker = new Worker<ControlJob, ControlResult>(
    ctx.keys.controlQueueName(),
    async (job: Job<ControlJob>) => {
      const data = controlJobSchema.parse(job.data);
      ctx.logger.info({ schedule: data.scheduleId, desired: data.desired }, 'scheduled reconcile starting');
      const summary = await runReconcile(ctx, {
        file: data.desired,
        defaultOrg: data.defaultOrg,
        orgIds: data.orgIds,
        sourceLabel: `schedule ${data.scheduleId}: reconcile ${basename(data.desired)}`,
      });
      ctx.logger.info(
        {
          schedule: data.scheduleId,
          runId: summary.runId,
          enqueued: summary.enqueued,
          wrongOrg: summary.wrongOrg,
          notFound: summary.notFound,
        },
        'scheduled reconcile done',
      );
      options.onRun?.(summary);
      return {
        runId: summary.runId,
        enqueued: summary.enqueued,
        wrongOrg: summary.wrongOrg,
        notFound: summary.notFound,
      };
    },
    { connection, prefix: ctx.keys.prefix, concurrency: 1 },
  );
  worker.on('failed', (job, err) =>
    ctx.logger.error({ schedule: job?.data.scheduleId, err: err.message }, 'scheduled reconcile failed'),
  );
  worker.on('error', (err) => errors.warn({ err: err.message }, 'control worker error'));
  return {
    worker,
    async close() {
      await worker.close();
      await closeRedis(connection);
      errors.stop();
    },
  };
}
