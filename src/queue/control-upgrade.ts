// Moves the schedules of the old control queue `control` (no hash tag, which a Cluster refuses) to
// `{control}`, once, at start.
import { LanesDue } from './lanes-due.ts';
import { Queue } from 'bullmq';
import type { Keys } from '../core/keys.ts';
import type { Logger } from '../core/log.ts';
import type { RedisClient } from '../redis/client.ts';
import { hasLegacyControlQueue } from './control-legacy.ts';
import { controlJobSchema, openControlQueue, upsertSchedule, type ControlJob } from './control.ts';

export interface ControlMove {
  schedules: number;
  jobs: number;
}

/**
 * Moves the schedules of the old control queue to the new one, same id and data, then removes them.
 * Idempotent: a schedule created twice is replaced. A cluster never had the old queue.
 */
export async function moveLegacyControlQueue(
  redis: RedisClient,
  keys: Keys,
  logger: Logger,
): Promise<ControlMove> {
  const moved: ControlMove = { schedules: 0, jobs: 0 };
  // Opening a BullMQ queue writes its meta key: look first, so a prefix with no old queue stays untouched
  // (read-only commands write nothing). Schedules live in `repeat`, jobs due now in `wait`/`prioritized`.
  if (!(await hasLegacyControlQueue(redis, keys))) return moved;
  const legacy = new Queue<ControlJob, unknown, string>(keys.legacyControlQueueName(), {
    connection: redis,
    prefix: keys.prefix,
  });
  const current = openControlQueue(redis, keys);
  try {
    const schedulers = await legacy.getJobSchedulers(0, -1, true);
    for (const s of schedulers) {
      const data = controlJobSchema.safeParse(s.template?.data);
      if (!data.success || (!s.pattern && !s.every)) {
        logger.warn(
          { schedule: s.key },
          'an old schedule could not be read and was left in the old control queue',
        );
        continue;
      }
      await upsertSchedule(
        current,
        {
          id: s.key,
          cron: s.pattern ?? undefined,
          every: s.every ? Number(s.every) : undefined,
          tz: s.tz ?? undefined,
          data: data.data,
        },
        new LanesDue(redis, keys),
      );
      await legacy.removeJobScheduler(s.key);
      moved.schedules++;
    }
    // A reconcile due and not yet taken moves; a schedule's own next job does not (it would run twice).
    for (const job of await legacy.getJobs(['waiting', 'prioritized'], 0, -1)) {
      const data = controlJobSchema.safeParse(job.data);
      if (!data.success || !job.id) continue;
      if (job.repeatJobKey) {
        await legacy.remove(job.id);
        continue;
      }
      await current.add(job.name, data.data, {
        attempts: 1,
        removeOnComplete: { count: 100 },
        removeOnFail: { count: 100 },
      });
      await legacy.remove(job.id);
      moved.jobs++;
    }
    if (moved.schedules + moved.jobs > 0) {
      logger.info(moved, 'scheduled reconciles moved to the control queue of this release ({control})');
    }
    return moved;
  } finally {
    await Promise.all([legacy.close(), current.close()]);
  }
}
