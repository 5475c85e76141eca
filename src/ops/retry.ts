// retry: re-queue learners whose outcome is final and not a success, with fresh attempts. They keep
// their run (so its counters show them moving back to waiting) unless the caller names a new one.
import type { AppContext } from '../app/context.ts';
import { CANCELLED, FAILURE_BUCKETS, type Bucket } from '../outcomes/record.ts';
import type { ProducerItem } from '../queue/producer.ts';
import { newRunId } from '../outcomes/runs.ts';

/** Lets the event loop run (probes, other requests) between chunks of a bulk retry. */
const yieldToLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

export interface RetryFilter {
  orgs: readonly string[];
  /** Outcome code to retry (default: every failure). */
  status?: string | undefined;
  learnerIds?: readonly number[] | undefined;
  runId?: string | undefined;
  /** Move learners claimed by another organization (since they failed here) back to this one. */
  move?: boolean | undefined;
}

export interface RetrySummary {
  requeued: number;
  byOrg: Record<string, number>;
  /** Learners named with --learner that were not retryable, with why. */
  skipped: { org: string; learnerId: number; reason: string }[];
}

export async function retryFailed(ctx: AppContext, filter: RetryFilter): Promise<RetrySummary> {
  const summary: RetrySummary = { requeued: 0, byOrg: {}, skipped: [] };
  for (const org of filter.orgs) {
    const batch: (ProducerItem & { runId: string })[] = [];
    const consider = (_learnerId: number, bucket: Bucket, code: string | undefined, runId: string) => {
      if (filter.status && bucket !== filter.status && code !== filter.status) return false;
      if (filter.runId && runId !== filter.runId) return false;
      // A cancelled learner is re-opened only when a person names it (--learner, or --status cancelled):
      // retrying every failure must not undo a cancel.
      if (bucket === CANCELLED) return named || filter.status === CANCELLED;
      return FAILURE_BUCKETS.includes(bucket);
    };
    const named = filter.learnerIds !== undefined && filter.learnerIds.length > 0;
    if (filter.learnerIds && filter.learnerIds.length > 0) {
      const records = await ctx.store.getMany(org, filter.learnerIds);
      filter.learnerIds.forEach((learnerId, i) => {
        const r = records[i];
        if (!r) return summary.skipped.push({ org, learnerId, reason: 'no record in this organization' });
        if (!consider(learnerId, r.b as Bucket, r.c, r.r)) {
          return summary.skipped.push({
            org,
            learnerId,
            reason: `state is ${r.b}, not a failure matching the filter`,
          });
        }
        batch.push({ org, learnerId, source: 'retry', runId: r.r });
      });
    } else {
      // Failure buckets are indexed: read their ids (a snapshot: re-queueing removes them from the index).
      const buckets =
        filter.status === CANCELLED
          ? [CANCELLED as Bucket]
          : FAILURE_BUCKETS.filter((b) => !filter.status || b === filter.status);
      for (const bucket of buckets) {
        const ids = await ctx.store.bucketPage(org, bucket, 0, Number.MAX_SAFE_INTEGER - 1);
        for (let i = 0; i < ids.length; i += 1000) {
          const chunk = ids.slice(i, i + 1000);
          const records = await ctx.store.getMany(org, chunk);
          await yieldToLoop();
          chunk.forEach((learnerId, j) => {
            const r = records[j];
            if (r && consider(learnerId, r.b as Bucket, r.c, r.r))
              batch.push({ org, learnerId, source: 'retry', runId: r.r });
          });
        }
      }
    }
    // Each learner goes back into its own run.
    const byRun = new Map<string, ProducerItem[]>();
    for (const b of batch) {
      const list = byRun.get(b.runId);
      if (list) list.push(b);
      else byRun.set(b.runId, [b]);
    }
    for (const [ownRun, items] of byRun) {
      const runId = await liveRun(ctx, ownRun, org);
      for (let i = 0; i < items.length; i += 1000) {
        const counts = await ctx.producer.add(items.slice(i, i + 1000), runId, {
          force: true,
          move: filter.move === true,
          onHeld: (h) => {
            summary.skipped.push({ org, learnerId: h.item.learnerId, reason: h.reason });
          },
        });
        summary.requeued += counts.enqueued;
        summary.byOrg[org] = (summary.byOrg[org] ?? 0) + counts.enqueued;
        await yieldToLoop();
      }
    }
  }
  return summary;
}

/**
 * The run a retried learner goes back into: its own, unless that run was compacted after RUN_RETENTION
 * (ops/run-retention.ts): its counters are a summary now, so the learner starts a new run that says
 * where it came from.
 */
async function liveRun(ctx: AppContext, runId: string, org: string): Promise<string> {
  const meta = await ctx.runs.get(runId);
  if (!meta?.compacted) return runId;
  const id = newRunId();
  await ctx.runs.create({ id, kind: 'retry', source: `retry of compacted run ${runId}`, orgs: [org] });
  return id;
}
