// One lane as a `work` process holds it (lanes.ts): its attached worker, its lease, what it has in hand,
// and when it is due again once detached.
import type { Worker } from 'bullmq';
import type { LaneJobs } from '../queue/lane-state.ts';

export type DetachReason = 'drained' | 'budget' | 'rotate' | 'stop' | 'removed';

export interface Lane {
  name: string;
  worker: Worker;
  dispose: () => void;
  /** The lease time this process wrote (as Redis compares it). */
  lease: string;
  since: number;
  inFlight: number;
  drainTimer: NodeJS.Timeout | undefined;
  closing: Promise<void> | undefined;
  /** The worker's own concurrency (it runs with less while lanes wait: #pace). */
  concurrency: number;
  /** When its organization's limiter last announced budget back (0: never while attached). */
  lastEventAt: number;
  /** Closing, and its blocking connection let go already: it holds no slot. */
  released: boolean;
  budgetUntil: number | undefined;
}

/** A lane just attached: nothing in hand, not closing, at its worker's own concurrency. */
export function newLane(name: string, worker: Worker, dispose: () => void, lease: string): Lane {
  return {
    name,
    worker,
    dispose,
    lease,
    since: Date.now(),
    inFlight: 0,
    drainTimer: undefined,
    closing: undefined,
    concurrency: worker.concurrency,
    lastEventAt: 0,
    released: false,
    budgetUntil: undefined,
  };
}

/** When the lane needs a worker again, from what is left in its queue (null: nothing). */
export function dueAgain(
  lane: Lane,
  reason: DetachReason,
  q: LaneJobs,
  stalledIntervalMs: number,
): number | null {
  const now = Date.now();
  const any = q.ready + q.active > 0 || q.firstDelayed !== undefined;
  if (!any) return null;
  if (reason === 'budget' && lane.budgetUntil !== undefined) return lane.budgetUntil;
  if (q.ready > 0) return now;
  const times: number[] = [];
  // Jobs active with no worker here: another process's, or stalled ones that a second look moves.
  if (q.active > 0) times.push(now + stalledIntervalMs);
  if (q.firstDelayed !== undefined) times.push(Math.max(now, q.firstDelayed));
  return Math.min(...times);
}
