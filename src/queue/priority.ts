// Urgent learners (`enqueue --priority urgent`, the dashboard's "Move ahead of the queue"): put on the
// head of their organization's wait list, not given a BullMQ priority (docs/urgent.md says why and what
// operators see). The budget is untouched: only the order changes.
import type { Job } from 'bullmq';
import { jobIdOf, type TransferJob } from './job.ts';
import type { TransferQueue } from './queues.ts';
import type { RedisClient } from '../redis/client.ts';
import type { NewChange } from '../limiter/control-log.ts';

export const PRIORITIES = ['normal', 'urgent'] as const;
export type Priority = (typeof PRIORITIES)[number];

/** What an urgent request did to one learner's job. */
export type AheadResult =
  /** No job existed: added on the head of the wait list. */
  | 'added'
  /** The job was waiting (or waiting out a backoff): moved to the head of the wait list. */
  | 'moved'
  /** The job is in a worker's hands: nothing to move. */
  | 'in-flight'
  /** The job had just finished or vanished when it was looked at: nothing moved. */
  | 'gone';

/** The learners of one organization an urgent request touched, by what happened to their job. */
export interface UrgentBatch {
  org: string;
  runId: string;
  added: number[];
  moved: number[];
  inFlight: number[];
  gone: number[];
}

export function emptyUrgentBatch(org: string, runId: string): UrgentBatch {
  return { org, runId, added: [], moved: [], inFlight: [], gone: [] };
}

/** Learners an urgent batch put ahead of the bulk (added or moved). */
export function aheadOf(b: UrgentBatch): number[] {
  return [...b.added, ...b.moved];
}

/**
 * Moves these learners' existing jobs to the head of the wait list; the last one ends on the head
 * (callers pass them in reverse to keep their order).
 */
export async function moveAhead(
  queue: TransferQueue,
  learnerIds: readonly number[],
): Promise<Map<number, AheadResult>> {
  const out = new Map<number, AheadResult>();
  const one = async (learnerId: number): Promise<AheadResult> => {
    const jobId = jobIdOf(learnerId);
    const job = (await queue.getJob(jobId)) as Job<TransferJob> | undefined;
    if (!job) return 'gone';
    const state = await job.getState();
    if (state === 'active') return 'in-flight';
    if (state === 'delayed') {
      // Waiting out a backoff or a lease: let it go now. A worker that takes it still goes through the
      // limiter and the learner's lease, so nothing is sent sooner than the budget allows.
      try {
        await job.promote();
      } catch {
        // It left `delayed` on its own meanwhile (promoted by a worker, or taken): look again below.
      }
    } else if (state !== 'waiting' && state !== 'prioritized') {
      return state === 'unknown' || state === 'completed' || state === 'failed' ? 'gone' : 'in-flight';
    }
    // Out of `wait` (or `prioritized`) and onto the head of `wait`, atomically. A job taken by a worker
    // in between is in neither: the script then only writes priority 0, which it already had.
    await job.changePriority({ priority: 0, lifo: true });
    // Taken at once (a short queue): the learner is ahead of the bulk all the same.
    const after = await queue.getJobState(jobId);
    return after === 'waiting' || after === 'active' ? 'moved' : 'gone';
  };
  // One after another, so the last of the list ends on the head; urgent requests are a few learners.
  for (const id of learnerIds) out.set(id, await one(id));
  return out;
}

/** Where a learner's job stands in its queue, for the learner page. */
export interface QueuePlace {
  state: string;
  /** 1 = the next job taken; undefined when not waiting or further than `scan` from the head. */
  position?: number;
  /** Jobs in the wait list. */
  waiting?: number;
}

/**
 * The state of a learner's job and, when it waits, its place from the head of the wait list. Looks at the
 * `scan` jobs nearest the head only (LPOS MAXLEN): a page view must not walk a million-job list.
 */
export async function queuePlace(
  redis: RedisClient,
  queue: TransferQueue,
  learnerId: number,
  scan = 10_000,
): Promise<QueuePlace> {
  const jobId = jobIdOf(learnerId);
  const state = await queue.getJobState(jobId);
  if (state !== 'waiting') return { state };
  const waitKey = queue.keys.wait ?? '';
  const [waiting, index] = await Promise.all([
    redis.llen(waitKey),
    // RANK -1: search from the right end, which is the head (workers pop from the right).
    redis.lpos(waitKey, jobId, 'RANK', -1, 'MAXLEN', scan) as Promise<number | null>,
  ]);
  return index === null ? { state, waiting } : { state, waiting, position: waiting - index };
}

/** Most learner ids one change-log entry lists. */
const MAX_IDS_PER_ENTRY = 1000;

/**
 * The change-log entry of one urgent batch (action `priority.urgent`): the learners put ahead of the
 * bulk, those already in flight, the source of the request (`cli enqueue --csv FILE`, `dashboard`).
 */
export function urgentChange(batch: UrgentBatch, who: string, source: string): NewChange {
  const ahead = aheadOf(batch);
  return {
    who,
    action: 'priority.urgent',
    org: batch.org,
    tokenId: null,
    details: {
      learnerIds: ahead.slice(0, MAX_IDS_PER_ENTRY),
      ...(ahead.length > MAX_IDS_PER_ENTRY ? { learnerCount: ahead.length } : {}),
      source,
      runId: batch.runId,
      added: batch.added.length,
      moved: batch.moved.length,
      ...(batch.inFlight.length ? { inFlight: batch.inFlight.slice(0, MAX_IDS_PER_ENTRY) } : {}),
      ...(batch.gone.length ? { finished: batch.gone.slice(0, MAX_IDS_PER_ENTRY) } : {}),
    },
  };
}
