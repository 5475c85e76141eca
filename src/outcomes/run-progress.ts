// Bucket counters (of a run or an organization) folded into what a progress bar shows.
import {
  AWAITING_APPROVAL,
  BUCKETS,
  CANCELLED,
  isFinalBucket,
  isSuccessBucket,
  type Bucket,
} from './record.ts';
import type { RunCounts } from './store.ts';

export interface RunProgress {
  /** transferred + already-in-org */
  done: number;
  /** final outcomes that are not a success (cancelled learners are not among them) */
  failed: number;
  /** queued + retrying */
  waiting: number;
  /** withdrawn by an operator before their call (`cancel`): neither done nor failed */
  cancelled: number;
  /**
   * past a canary, waiting for a person's approval (no job): neither done, failed nor waiting for a
   * worker. Absent from counters of earlier releases: 0.
   */
  approval: number;
  total: number;
}

export function progressOf(counts: RunCounts): RunProgress {
  const p: RunProgress = { done: 0, failed: 0, waiting: 0, cancelled: 0, approval: 0, total: 0 };
  for (const bucket of BUCKETS) {
    const n = counts[bucket as Bucket] ?? 0;
    if (n <= 0) continue;
    if (isSuccessBucket(bucket)) p.done += n;
    else if (bucket === CANCELLED) p.cancelled += n;
    else if (bucket === AWAITING_APPROVAL) p.approval += n;
    else if (isFinalBucket(bucket)) p.failed += n;
    else p.waiting += n;
  }
  // A run's `total` counts each learner once; an organization's counters have none, so sum the buckets.
  p.total = Math.max(counts.total ?? 0, p.done + p.failed + p.waiting + p.cancelled + p.approval);
  return p;
}
