// The control queue: the fleet's scheduled work (a nightly reconcile), as BullMQ job schedulers that
// one of the `work` processes runs, without cron.
import { realpath } from 'node:fs/promises';
import { isAbsolute, relative, resolve, sep } from 'node:path';
import { Queue, type JobSchedulerJson } from 'bullmq';
import { LearnerTransferError } from '../core/errors.ts';
import type { RedisClient } from '../redis/client.ts';
import * as z from 'zod';
import type { Keys } from '../core/keys.ts';
import { CONTROL_LANE, type LanesDue } from './lanes-due.ts';

export const controlJobSchema = z.object({
  kind: z.literal('reconcile'),
  scheduleId: z.string(),
  /** Absolute path of the desired-state CSV, readable by the worker hosts at this path. */
  desired: z.string(),
  defaultOrg: z.string().optional(),
  /** Organization ids known when the schedule was made. */
  orgIds: z.record(z.string(), z.number().int().positive()).default({}),
});
export type ControlJob = z.infer<typeof controlJobSchema>;

/**
 * The real path of a scheduled reconcile's desired file, refused unless inside SCHEDULE_DIR once every
 * symlink is resolved. The message never quotes the file.
 */
export async function resolveScheduleFile(scheduleDir: string | undefined, file: string): Promise<string> {
  if (!scheduleDir) {
    throw new LearnerTransferError(
      'LT_USAGE',
      `scheduled reconciles are off: SCHEDULE_DIR is not set (set it, on the workers too, to the directory that holds the desired files; ${file} was not read)`,
    );
  }
  let dir: string;
  try {
    dir = await realpath(resolve(scheduleDir));
  } catch (err) {
    throw new LearnerTransferError(
      'LT_USAGE',
      `SCHEDULE_DIR ${scheduleDir} cannot be read (${(err as { code?: string }).code ?? 'error'})`,
    );
  }
  let real: string;
  try {
    real = await realpath(resolve(dir, file));
  } catch (err) {
    throw new LearnerTransferError(
      'LT_INPUT_UNREADABLE',
      `${file}: cannot be read (${(err as { code?: string }).code ?? 'error'})`,
    );
  }
  const rel = relative(dir, real);
  if (rel === '' || rel === '..' || rel.startsWith(`..${sep}`) || isAbsolute(rel)) {
    throw new LearnerTransferError(
      'LT_USAGE',
      `${file}: refused: a scheduled reconcile reads only files inside SCHEDULE_DIR (${dir}); the file was not read`,
    );
  }
  return real;
}

export type ControlQueue = Queue<ControlJob, unknown, string>;

export function openControlQueue(redis: RedisClient, keys: Keys): ControlQueue {
  return new Queue<ControlJob, unknown, string>(keys.controlQueueName(), {
    connection: redis,
    prefix: keys.prefix,
  });
}

export interface ScheduleSpec {
  id: string;
  /** Cron pattern (5 or 6 fields), or... */
  cron?: string | undefined;
  /** ...a fixed interval in ms. */
  every?: number | undefined;
  tz?: string | undefined;
  data: ControlJob;
}

/** Creates or replaces a schedule. A scheduled reconcile is not retried: the next one comes anyway. */
export async function upsertSchedule(queue: ControlQueue, spec: ScheduleSpec, due: LanesDue): Promise<void> {
  await queue.upsertJobScheduler(
    spec.id,
    spec.cron ? { pattern: spec.cron, ...(spec.tz ? { tz: spec.tz } : {}) } : { every: spec.every },
    {
      name: spec.data.kind,
      data: spec.data,
      opts: { attempts: 1, removeOnComplete: { count: 100 }, removeOnFail: { count: 100 } },
    },
  );
  // The schedule's first job is delayed: a worker attached for the control lane sees when it is due.
  await due.markDue([CONTROL_LANE]);
}

export async function listSchedules(queue: ControlQueue): Promise<JobSchedulerJson<ControlJob>[]> {
  return queue.getJobSchedulers(0, -1, true);
}

export function formatSchedules(list: readonly JobSchedulerJson<ControlJob>[]): string {
  if (list.length === 0) return 'no schedules';
  return list
    .map((s) => {
      const when = s.pattern ? `cron "${s.pattern}"${s.tz ? ` ${s.tz}` : ''}` : `every ${s.every} ms`;
      const next = s.next ? new Date(s.next).toISOString() : '-';
      const d = s.template?.data;
      return `${s.key}  ${s.name}  ${when}  next ${next}${d ? `  desired ${d.desired}` : ''}`;
    })
    .join('\n');
}
