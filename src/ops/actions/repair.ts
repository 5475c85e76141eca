// The repair sweep: a waiting learner without a job gets one again, a job without a record gets a
// `queued` record (a crash between the two writes, a job removed by hand, leaves one without the other).
import type { RedisClient } from '../../redis/client.ts';
import { AWAITING_APPROVAL, isFinalBucket, type Bucket } from '../../outcomes/record.ts';
import type { OutcomeStore } from '../../outcomes/store.ts';
import { JOB_NAME, jobIdOf, transferJobSchema } from '../../queue/job.ts';
import type { QueueSet } from '../../queue/queues.ts';
import { LanesDue } from '../../queue/lanes-due.ts';
import type { Keys } from '../../core/keys.ts';

export interface RepairReport {
  org: string;
  /** Records that wait (queued, retrying) with no job able to move them. */
  stranded: number;
  /** Of those, jobs added again (0 with dryRun). */
  readded: number;
  /** Jobs waiting with no record. */
  orphanJobs: number;
  /** Of those, records written (0 with dryRun). */
  recorded: number;
  /** Up to 10 learner ids found, for the report. */
  examples: number[];
}

const CHUNK = 1000;

export async function repairOrg(
  deps: { store: OutcomeStore; queues: QueueSet; redis: RedisClient; keys: Keys },
  org: string,
  options: { dryRun?: boolean } = {},
): Promise<RepairReport> {
  const report: RepairReport = { org, stranded: 0, readded: 0, orphanJobs: 0, recorded: 0, examples: [] };
  const queue = deps.queues.get(org);
  const waiting: number[] = [];
  const check = async (ids: number[]) => {
    if (ids.length === 0) return;
    const pipe = deps.redis.pipeline();
    for (const id of ids) {
      pipe.exists(queue.toKey(jobIdOf(id)));
      pipe.zscore(queue.keys.failed ?? '', jobIdOf(id));
    }
    const replies = (await pipe.exec()) ?? [];
    const suspects: { id: number; failed: boolean }[] = [];
    ids.forEach((id, i) => {
      const exists = Number(replies[2 * i]?.[1] ?? 0) === 1;
      const failed = replies[2 * i + 1]?.[1] !== null && replies[2 * i + 1]?.[1] !== undefined;
      if (!exists || failed) suspects.push({ id, failed });
    });
    if (suspects.length === 0) return;
    // Read the records again: a worker may have finished the learner (and its job gone) since the scan.
    const records = await deps.store.getMany(
      org,
      suspects.map((s) => s.id),
    );
    for (const [i, s] of suspects.entries()) {
      const rec = records[i];
      if (!rec || isFinalBucket(rec.b as Bucket) || rec.b === AWAITING_APPROVAL) continue;
      report.stranded++;
      if (report.examples.length < 10) report.examples.push(s.id);
      if (options.dryRun) continue;
      if (s.failed) await queue.remove(jobIdOf(s.id));
      await queue.add(
        JOB_NAME,
        { org, learnerId: s.id, runId: rec.r, source: rec.src ?? 'repair' },
        { jobId: jobIdOf(s.id) },
      );
      report.readded++;
    }
  };
  for await (const [id, rec] of deps.store.scan(org)) {
    // A learner awaiting approval after a canary has no job on purpose: it waits on a person.
    if (isFinalBucket(rec.b as Bucket) || rec.b === AWAITING_APPROVAL) continue;
    waiting.push(id);
    if (waiting.length >= CHUNK) await check(waiting.splice(0));
  }
  await check(waiting.splice(0));

  // Jobs that wait without a record (added by hand, or a record lost with a Redis that kept nothing).
  const jobIds = [
    ...(await deps.redis.lrange(queue.keys.wait ?? '', 0, -1)),
    ...(await deps.redis.zrange(queue.keys.delayed ?? '', 0, -1)),
    ...(await deps.redis.zrange(queue.keys.prioritized ?? '', 0, -1)),
  ];
  for (let i = 0; i < jobIds.length; i += CHUNK) {
    const chunk = jobIds.slice(i, i + CHUNK).filter((j) => /^l\d+$/.test(j));
    const ids = chunk.map((j) => Number(j.slice(1)));
    const records = await deps.store.getMany(org, ids);
    for (const [k, id] of ids.entries()) {
      if (records[k]) continue;
      const job = await queue.getJob(chunk[k] as string);
      const data = transferJobSchema.safeParse(job?.data);
      if (!data.success) continue;
      report.orphanJobs++;
      if (report.examples.length < 10) report.examples.push(id);
      if (options.dryRun) continue;
      await deps.store.markQueued([
        { org, learnerId: id, runId: data.data.runId, source: data.data.source, force: false },
      ]);
      report.recorded++;
    }
  }
  // A re-added job is found by a worker only once its lane is marked due (worker/lanes.ts).
  if (report.readded > 0) await new LanesDue(deps.redis, deps.keys).markDue([org]);
  return report;
}

export function formatRepair(r: RepairReport): string {
  const ex = r.examples.length ? ` (e.g. learners ${r.examples.join(', ')})` : '';
  return `${r.org}: ${r.stranded} waiting without a job (${r.readded} re-added), ${r.orphanJobs} jobs without a record (${r.recorded} recorded)${ex}`;
}
