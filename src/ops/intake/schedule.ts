// Schedules of the control queue that the `work` fleet performs (the schedule command): a reconcile
// checked now for what would fail when it runs, listed, removed.
import { LanesDue } from '../../queue/lanes-due.ts';
import { access, constants } from 'node:fs/promises';
import { basename, extname, resolve } from 'node:path';
import type { JobSchedulerJson } from 'bullmq';
import type { AppContext } from '../../app/context.ts';
import { LearnerTransferError } from '../../core/errors.ts';
import {
  listSchedules,
  openControlQueue,
  resolveScheduleFile,
  upsertSchedule,
  type ControlJob,
  type ControlQueue,
} from '../../queue/control.ts';
import { OrgIds, unknownOrgId } from '../../queue/org-ids.ts';
import { readCsv } from '../../queue/sources/csv.ts';

export interface ReconcileSchedule {
  /** The desired-state CSV, as resolveDesiredFile returned it. */
  desired: string;
  defaultOrg?: string | undefined;
  /** --org-id pairs given now (remembered in Redis). */
  orgIds?: Readonly<Record<string, number>> | undefined;
  cron?: string | undefined;
  every?: number | undefined;
  tz?: string | undefined;
  /** Default: reconcile-<file name>. */
  id?: string | undefined;
}

/**
 * The desired file of a scheduled reconcile: inside SCHEDULE_DIR (symlinks resolved: the workers refuse
 * any other) and readable now. Checked before Redis is reached.
 */
export async function resolveDesiredFile(scheduleDir: string | undefined, file: string): Promise<string> {
  const desired = await resolveScheduleFile(scheduleDir, resolve(file));
  try {
    await access(desired, constants.R_OK);
  } catch (err) {
    throw new LearnerTransferError(
      'LT_INPUT_UNREADABLE',
      `${desired}: cannot be read (${(err as Error).message})`,
      { cause: err },
    );
  }
  return desired;
}

async function withControlQueue<T>(ctx: AppContext, body: (queue: ControlQueue) => Promise<T>): Promise<T> {
  const queue = openControlQueue(ctx.redis, ctx.keys);
  try {
    return await body(queue);
  } finally {
    await queue.close();
  }
}

/** The organizations of the file, each with its numeric id: what a reconcile at 02:00 would need. */
async function orgIdsOfFile(ctx: AppContext, spec: ReconcileSchedule): Promise<Record<string, number>> {
  const orgs = new Set<string>();
  for await (const ev of readCsv({
    file: spec.desired,
    defaultOrg: spec.defaultOrg,
    knownOrgs: ctx.config.orgs,
  })) {
    if (ev.kind === 'row') orgs.add(ev.org);
  }
  const ids = new OrgIds(ctx.redis, ctx.keys);
  await ids.set(spec.orgIds ?? {});
  const known = await ids.all();
  const missing = [...orgs].filter((o) => known[o] === undefined);
  if (missing.length > 0)
    throw unknownOrgId(missing.join(', '), missing.map((o) => `--org-id ${o}=N`).join(' '));
  return Object.fromEntries([...orgs].map((o) => [o, known[o] as number]));
}

/** Saves (or replaces) a scheduled reconcile; returns its id and the schedule as stored. */
export async function saveReconcileSchedule(
  ctx: AppContext,
  spec: ReconcileSchedule,
): Promise<{ id: string; saved: JobSchedulerJson<ControlJob> | undefined }> {
  return withControlQueue(ctx, async (queue) => {
    const orgIds = await orgIdsOfFile(ctx, spec);
    const id = spec.id ?? `reconcile-${basename(spec.desired, extname(spec.desired))}`;
    try {
      await upsertSchedule(
        queue,
        {
          id,
          cron: spec.cron,
          every: spec.every,
          tz: spec.tz,
          data: {
            kind: 'reconcile',
            scheduleId: id,
            desired: spec.desired,
            ...(spec.defaultOrg ? { defaultOrg: spec.defaultOrg } : {}),
            orgIds,
          },
        },
        new LanesDue(ctx.redis, ctx.keys),
      );
    } catch (err) {
      throw new LearnerTransferError('LT_USAGE', `schedule '${id}': ${(err as Error).message}`, {
        cause: err,
      });
    }
    const [saved] = (await listSchedules(queue)).filter((s) => s.key === id);
    return { id, saved };
  });
}

export function scheduleList(ctx: AppContext): Promise<JobSchedulerJson<ControlJob>[]> {
  return withControlQueue(ctx, (queue) => listSchedules(queue));
}

/** Removes a schedule (a run in progress finishes); a usage error when there is none of that id. */
export async function removeSchedule(ctx: AppContext, id: string): Promise<void> {
  const removed = await withControlQueue(ctx, (queue) => queue.removeJobScheduler(id));
  if (!removed)
    throw new LearnerTransferError('LT_USAGE', `no schedule '${id}' (see: learner-transfer schedule list)`);
}
