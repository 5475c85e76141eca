// cancel: withdraw learners before their call (docs/cancel.md), each decided atomically against its
// lease and record (outcomes/cancel-learners.lua); then their jobs leave the queues and their claims
// are released.
import type { AppContext } from '../../app/context.ts';
import { AWAITING_APPROVAL, CANCELLED, isSuccessBucket, type Bucket } from '../../outcomes/record.ts';
import type { CancelDecision } from '../../outcomes/store.ts';
import { countHourly } from '../../outcomes/hourly.ts';
import { JOB_NAME, jobIdOf, type TransferJob } from '../../queue/job.ts';
import { appendChange } from '../../limiter/control-log.ts';

export interface LearnerRef {
  org: string;
  learnerId: number;
}

/** Which learners: those of a run, or named (by id, or with their organization). */
export interface CancelFilter {
  /** The organizations looked in (a run's or a learner's outside them are left alone). */
  orgs: readonly string[];
  /** Every learner of this run in those organizations. */
  runId?: string | undefined;
  /** These learner ids, in whichever of the organizations holds them (their claim says which). */
  learnerIds?: readonly number[] | undefined;
  /** These learners of these organizations (a CSV's rows). */
  learners?: readonly LearnerRef[] | undefined;
  /** Decide only: nothing is written, no job removed. */
  dryRun?: boolean | undefined;
  /** What was asked, for the change log: `run r-1`, `csv wrong.csv`, `learner 5,6`. */
  describe?: string | undefined;
}

/** Why a learner was not withdrawn (besides in flight). */
export type NotCancellableReason = 'done' | 'failed' | 'already-cancelled' | 'unknown' | 'changed';

export interface CancelSummary {
  dryRun: boolean;
  /** Learners withdrawn (with dryRun: that would be). */
  cancelled: number;
  byOrg: Record<string, number>;
  /** Learners whose call is in flight: it finishes and its outcome is recorded. */
  inFlight: LearnerRef[];
  /** The rest, by reason, each with its count and its first learners (up to SAMPLE). */
  notCancellable: { reason: NotCancellableReason; count: number; learners: LearnerRef[] }[];
  /** Of the cancelled, jobs a worker held (it ends them with no call). */
  jobsLeftToWorkers: number;
  /** The change-log entry (none for a dry run or when nothing was cancelled). */
  changeId: string | null;
}

const SAMPLE = 20;
const BATCH = 500;

/** Withdraws the learners the filter selects; `who` is the actor the record and the change log keep. */
export async function cancelLearners(
  ctx: AppContext,
  filter: CancelFilter,
  who: string,
): Promise<CancelSummary> {
  const tally = new Tally(filter.dryRun === true);
  for (const [org, ids] of await selectLearners(ctx, filter, tally)) {
    for (let i = 0; i < ids.length; i += BATCH) {
      await cancelBatch(ctx, org, ids.slice(i, i + BATCH), filter, who, tally);
    }
  }
  const summary = tally.summary();
  if (!summary.dryRun && summary.cancelled > 0) {
    const orgs = Object.keys(summary.byOrg);
    // A canary run withdrawn: nothing of it awaits approval there any more.
    if (filter.runId) for (const org of orgs) await ctx.redis.hdel(ctx.keys.canaryRuns(org), filter.runId);
    summary.changeId = await appendChange(ctx.redis, ctx.keys, {
      who,
      action: 'cancel',
      org: orgs.length === 1 ? (orgs[0] as string) : null,
      tokenId: null,
      details: {
        filter: filter.describe ?? describeFilter(filter),
        cancelled: summary.cancelled,
        byOrg: summary.byOrg,
        inFlight: summary.inFlight.length,
      },
    });
  }
  return summary;
}

function describeFilter(f: CancelFilter): string {
  if (f.runId) return `run ${f.runId}`;
  if (f.learnerIds)
    return `learners ${f.learnerIds.slice(0, 10).join(',')}${f.learnerIds.length > 10 ? ',...' : ''}`;
  return `${f.learners?.length ?? 0} learners`;
}

/** The candidates per organization; learners found nowhere are tallied `unknown` here. */
async function selectLearners(
  ctx: AppContext,
  filter: CancelFilter,
  tally: Tally,
): Promise<Map<string, number[]>> {
  const byOrg = new Map<string, number[]>();
  const add = (org: string, id: number) => byOrg.set(org, [...(byOrg.get(org) ?? []), id]);
  if (filter.runId) {
    const run = await ctx.runs.get(filter.runId);
    const orgs = run && run.orgs.length > 0 ? filter.orgs.filter((o) => run.orgs.includes(o)) : filter.orgs;
    for (const org of orgs) {
      // Every learner of the run: the done and failed ones are counted from the walk, the rest decided.
      for await (const [id, r] of ctx.store.scan(org)) {
        if (r.r !== filter.runId) continue;
        if (r.b === 'queued' || r.b === 'retrying' || r.b === 'held' || r.b === AWAITING_APPROVAL)
          add(org, id);
        else tally.state(org, id, r.b as Bucket);
      }
    }
    return byOrg;
  }
  if (filter.learners) {
    const seen = new Set<string>();
    for (const l of filter.learners) {
      const key = `${l.org}\u0000${l.learnerId}`;
      if (!seen.has(key)) add(l.org, l.learnerId);
      seen.add(key);
    }
    return byOrg;
  }
  const ids = [...new Set(filter.learnerIds ?? [])];
  const holders = await ctx.claims.holders(ids);
  const unclaimed: number[] = [];
  ids.forEach((id, i) => {
    const holder = holders[i];
    if (holder !== undefined && filter.orgs.includes(holder)) add(holder, id);
    else unclaimed.push(id);
  });
  // No claim here (a cancelled learner's was released, or a record older than claims): its record says.
  for (const org of filter.orgs) {
    if (unclaimed.length === 0) break;
    const records = await ctx.store.getMany(org, unclaimed);
    const found = new Set(unclaimed.filter((_, i) => records[i] !== undefined));
    for (const id of found) add(org, id);
    unclaimed.splice(0, unclaimed.length, ...unclaimed.filter((id) => !found.has(id)));
  }
  for (const id of unclaimed) tally.not('unknown', { org: '', learnerId: id });
  return byOrg;
}

/** One script call (two when a learner's run changed since it was read), then jobs and claims. */
async function cancelBatch(
  ctx: AppContext,
  org: string,
  ids: number[],
  filter: CancelFilter,
  who: string,
  tally: Tally,
): Promise<void> {
  const dryRun = filter.dryRun === true;
  const args = { who, dryRun, leaseGraceMs: ctx.config.leaseGraceMs, now: Date.now() };
  const runIds = new Set<string>(filter.runId ? [filter.runId] : []);
  if (!filter.runId) for (const r of await ctx.store.getMany(org, ids)) if (r) runIds.add(r.r);
  let pending = ids;
  const cancelled: number[] = [];
  // Per run, for the hourly records: a cancelled learner leaves the work left, as a finished one does.
  const byRun: Record<string, number> = {};
  for (let round = 0; round < 2 && pending.length > 0; round++) {
    const decisions = await ctx.store.cancel(org, pending, { ...args, runIds: [...runIds] });
    const again: number[] = [];
    decisions.forEach((d: CancelDecision, i) => {
      const learnerId = pending[i] as number;
      if (d.kind === 'cancelled') {
        cancelled.push(learnerId);
        byRun[d.runId] = (byRun[d.runId] ?? 0) + 1;
      } else if (d.kind === 'in-flight') tally.inFlight.push({ org, learnerId });
      else if (d.kind === 'none') tally.not('unknown', { org, learnerId });
      else if (d.kind === 'state') tally.state(org, learnerId, d.bucket);
      else if (filter.runId && d.runId !== filter.runId) tally.not('changed', { org, learnerId });
      else {
        runIds.add(d.runId);
        again.push(learnerId);
      }
    });
    pending = again;
  }
  for (const learnerId of pending) tally.not('changed', { org, learnerId });
  if (cancelled.length === 0) return;
  tally.cancelled(org, cancelled.length);
  if (dryRun) return;
  tally.jobsLeftToWorkers += await removeJobs(ctx, org, cancelled);
  await ctx.claims.release(cancelled.map((learnerId) => ({ org, learnerId })));
  await countHourly(ctx.redis, ctx.keys, org, CANCELLED, Date.now(), {
    n: cancelled.length,
    finalByRun: byRun,
  });
}

/**
 * Removes the cancelled learners' jobs (waiting, delayed, prioritized); returns how many a worker held
 * (BullMQ refuses to remove a locked job: its worker finds the record cancelled and calls nothing).
 * A learner enqueued again between the cancel and this removal must keep a job: it is added back.
 */
async function removeJobs(ctx: AppContext, org: string, ids: readonly number[]): Promise<number> {
  const queue = ctx.queues.get(org);
  let held = 0;
  for (let i = 0; i < ids.length; i += 100) {
    const chunk = ids.slice(i, i + 100);
    const codes = await Promise.all(chunk.map((id) => queue.remove(jobIdOf(id))));
    held += codes.filter((c) => c === 0).length;
    const removed = chunk.filter((_, j) => codes[j] === 1);
    const records = await ctx.store.getMany(org, removed);
    for (const [j, r] of records.entries()) {
      if (!r || r.b === CANCELLED || (r.b !== 'queued' && r.b !== 'retrying')) continue;
      const learnerId = removed[j] as number;
      const data: TransferJob = { org, learnerId, runId: r.r, source: r.src ?? 'enqueue' };
      await queue.add(JOB_NAME, data, { jobId: jobIdOf(learnerId) });
    }
  }
  return held;
}

class Tally {
  readonly #dryRun: boolean;
  readonly #byOrg: Record<string, number> = {};
  readonly #not = new Map<NotCancellableReason, { count: number; learners: LearnerRef[] }>();
  #cancelled = 0;
  readonly inFlight: LearnerRef[] = [];
  jobsLeftToWorkers = 0;

  constructor(dryRun: boolean) {
    this.#dryRun = dryRun;
  }

  cancelled(org: string, n: number): void {
    this.#cancelled += n;
    this.#byOrg[org] = (this.#byOrg[org] ?? 0) + n;
  }

  state(org: string, learnerId: number, bucket: Bucket): void {
    const reason: NotCancellableReason = isSuccessBucket(bucket)
      ? 'done'
      : bucket === CANCELLED
        ? 'already-cancelled'
        : 'failed';
    this.not(reason, { org, learnerId });
  }

  not(reason: NotCancellableReason, ref: LearnerRef): void {
    const entry = this.#not.get(reason) ?? { count: 0, learners: [] };
    entry.count++;
    if (entry.learners.length < SAMPLE) entry.learners.push(ref);
    this.#not.set(reason, entry);
  }

  summary(): CancelSummary {
    return {
      dryRun: this.#dryRun,
      cancelled: this.#cancelled,
      byOrg: this.#byOrg,
      inFlight: this.inFlight,
      notCancellable: [...this.#not].map(([reason, e]) => ({ reason, ...e })),
      jobsLeftToWorkers: this.jobsLeftToWorkers,
      changeId: null,
    };
  }
}
