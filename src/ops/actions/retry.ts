// retry: re-queue final failures with fresh attempts, in their own run, which is marked retried. Two
// steps so a caller can show what it touches first: selectRetry, then requeueSelected.
import type { AppContext } from '../../app/context.ts';
import { appendChange } from '../../limiter/control-log.ts';
import { CANCELLED, FAILURE_BUCKETS, isFinalBucket, type Bucket } from '../../outcomes/record.ts';
import type { ProducerItem } from '../../queue/producer.ts';
import { newRunId, type CanaryMeta } from '../../outcomes/runs.ts';
import { confirmationCodes } from './retry-risk.ts';

/** Lets the event loop run (probes, other requests) between chunks of a bulk retry. */
const yieldToLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Re-queued learners named in a summary at most (a caller shows them; the count is always whole). */
export const LEARNERS_NAMED = 10_000;

export interface RetryFilter {
  orgs: readonly string[];
  /** Outcome code to retry (default: every failure). */
  status?: string | undefined;
  learnerIds?: readonly number[] | undefined;
  runId?: string | undefined;
  /** Move learners claimed by another organization (since they failed here) back to this one. */
  move?: boolean | undefined;
}

export interface Skipped {
  org: string;
  learnerId: number;
  reason: string;
}

interface Selected {
  org: string;
  learnerId: number;
  bucket: Bucket;
  runId: string;
}

/** What a filter matched: the learners a retry would re-queue, read now. */
export interface RetrySelection {
  items: Selected[];
  /** Learners named with --learner that are not retryable, with why. */
  skipped: Skipped[];
}

export interface RetrySummary {
  requeued: number;
  byOrg: Record<string, number>;
  /** Learners named with --learner that were not retryable (or refused by their claim), with why. */
  skipped: Skipped[];
  /** What the filter matched, per outcome code (before the claims: `requeued` may be fewer). */
  matched: number;
  byCode: Record<string, number>;
  /** Codes among byCode a retry cannot help, or held ones: they need an explicit confirmation. */
  confirm: string[];
  /** Re-queued learners per run. */
  runs: Record<string, number>;
  /** Re-queued learners (`org:id`) with their attempts so far, at most LEARNERS_NAMED. */
  learners: { key: string; attempts: number }[];
  /** The change log entries written. */
  changeIds: string[];
  /** With a canary: its new run, and the learners that wait for its approval there. */
  canary?: { runId: string; awaitingApproval: number } | undefined;
}

export interface RequeueOptions {
  move?: boolean | undefined;
  /** The change log's author (cliActor, dashboard actorOf); without one nothing is logged (tests). */
  who?: string | undefined;
  /** The filter as the operator gave it, for the change log. */
  filter?: Record<string, unknown> | undefined;
  /**
   * A canary (--canary N, docs/canary.md): the learners go into one new run of kind `retry`, not back
   * into their own runs (a canary is judged on its run's own outcomes), whose first N per organization
   * are sent and the rest wait for approval.
   */
  canary?: CanaryMeta | undefined;
}

export function emptySummary(): RetrySummary {
  return {
    requeued: 0,
    byOrg: {},
    skipped: [],
    matched: 0,
    byCode: {},
    confirm: [],
    runs: {},
    learners: [],
    changeIds: [],
  };
}

export async function selectRetry(ctx: AppContext, filter: RetryFilter): Promise<RetrySelection> {
  const selection: RetrySelection = { items: [], skipped: [] };
  const named = filter.learnerIds !== undefined && filter.learnerIds.length > 0;
  const consider = (bucket: Bucket, code: string | undefined, runId: string) => {
    if (filter.status && bucket !== filter.status && code !== filter.status) return false;
    if (filter.runId && runId !== filter.runId) return false;
    // A cancelled learner is re-opened only when a person names it (--learner, or --status cancelled):
    // retrying every failure must not undo a cancel.
    if (bucket === CANCELLED) return named || filter.status === CANCELLED;
    return FAILURE_BUCKETS.includes(bucket);
  };
  for (const org of filter.orgs) {
    if (filter.learnerIds && filter.learnerIds.length > 0) {
      const records = await ctx.store.getMany(org, filter.learnerIds);
      filter.learnerIds.forEach((learnerId, i) => {
        const r = records[i];
        if (!r) return selection.skipped.push({ org, learnerId, reason: 'no record in this organization' });
        if (!consider(r.b as Bucket, r.c, r.r)) {
          return selection.skipped.push({
            org,
            learnerId,
            reason: `state is ${r.b}, not a failure matching the filter`,
          });
        }
        selection.items.push({ org, learnerId, bucket: r.b as Bucket, runId: r.r });
      });
      continue;
    }
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
          if (r && consider(r.b as Bucket, r.c, r.r))
            selection.items.push({ org, learnerId, bucket: r.b as Bucket, runId: r.r });
        });
      }
    }
  }
  return selection;
}

/** What a selection would do, without doing it: the dry run's answer. */
export function describeSelection(selection: RetrySelection): RetrySummary {
  const s = emptySummary();
  s.skipped = [...selection.skipped];
  for (const it of selection.items) {
    s.matched++;
    s.byCode[it.bucket] = (s.byCode[it.bucket] ?? 0) + 1;
  }
  s.confirm = confirmationCodes(s.byCode);
  return s;
}

export async function requeueSelected(
  ctx: AppContext,
  selection: RetrySelection,
  options: RequeueOptions = {},
): Promise<RetrySummary> {
  const summary = describeSelection(selection);
  const byOrg = new Map<string, Selected[]>();
  for (const it of selection.items) {
    const list = byOrg.get(it.org);
    if (list) list.push(it);
    else byOrg.set(it.org, [it]);
  }
  const at = new Date().toISOString();
  const canaryRun = options.canary ? await newCanaryRun(ctx, [...byOrg.keys()], options.canary) : undefined;
  for (const [org, items] of byOrg) {
    // Each learner goes back into its own run.
    const byRun = new Map<string, Selected[]>();
    for (const it of items) {
      const list = byRun.get(it.runId);
      if (list) list.push(it);
      else byRun.set(it.runId, [it]);
    }
    const done: Selected[] = [];
    for (const [ownRun, list] of byRun) {
      const runId = canaryRun ?? (await liveRun(ctx, ownRun, org));
      let inRun = 0;
      for (let i = 0; i < list.length; i += 1000) {
        const chunk = list.slice(i, i + 1000);
        const producerItems: ProducerItem[] = chunk.map((it) => ({
          org,
          learnerId: it.learnerId,
          source: 'retry',
        }));
        const counts = await ctx.producer.add(producerItems, runId, {
          force: true,
          move: options.move === true,
          ...(options.canary ? { canary: options.canary.size } : {}),
          onClaimedElsewhere: (h) => {
            summary.skipped.push({ org, learnerId: h.item.learnerId, reason: h.reason });
          },
        });
        summary.requeued += counts.enqueued;
        if (canaryRun) {
          summary.canary ??= { runId: canaryRun, awaitingApproval: 0 };
          summary.canary.awaitingApproval += counts.awaitingApproval;
        }
        summary.byOrg[org] = (summary.byOrg[org] ?? 0) + counts.enqueued;
        // Which ones are waiting now (the counts do not name them): their records say so.
        const records = await ctx.store.getMany(
          org,
          chunk.map((it) => it.learnerId),
        );
        chunk.forEach((it, j) => {
          const r = records[j];
          if (!r || isFinalBucket(r.b as Bucket) || r.r !== runId) return;
          inRun++;
          done.push(it);
          if (summary.learners.length < LEARNERS_NAMED)
            summary.learners.push({ key: `${org}:${it.learnerId}`, attempts: r.a });
        });
        await yieldToLoop();
      }
      if (inRun > 0) {
        summary.runs[runId] = (summary.runs[runId] ?? 0) + inRun;
        await ctx.runs.noteRetry(runId, { at, count: inRun, by: options.who ?? '' });
      }
    }
    if (options.who) summary.changeIds.push(...(await logRetry(ctx, org, done, options)));
  }
  return summary;
}

/** select, then re-queue: the CLI's `retry` and the tests. */
export async function retryFailed(
  ctx: AppContext,
  filter: RetryFilter,
  options: RequeueOptions = {},
): Promise<RetrySummary> {
  return requeueSelected(ctx, await selectRetry(ctx, filter), { move: filter.move, ...options });
}

/**
 * The change log: one entry per organization and kind, with counts and the filter (never one line per
 * learner: a retry of 20,000 is one entry). Held learners released are their own action, `held.release`.
 */
async function logRetry(
  ctx: AppContext,
  org: string,
  done: readonly Selected[],
  options: RequeueOptions,
): Promise<string[]> {
  const ids: string[] = [];
  for (const [action, part] of [
    ['retry', done.filter((it) => it.bucket !== 'held')],
    ['held.release', done.filter((it) => it.bucket === 'held')],
  ] as const) {
    if (part.length === 0) continue;
    const byCode: Record<string, number> = {};
    const byRun: Record<string, number> = {};
    for (const it of part) {
      byCode[it.bucket] = (byCode[it.bucket] ?? 0) + 1;
      byRun[it.runId] = (byRun[it.runId] ?? 0) + 1;
    }
    const details: Record<string, unknown> = { requeued: part.length, byCode, runs: byRun };
    if (options.filter) details.filter = options.filter;
    if (options.move) details.move = true;
    ids.push(
      await appendChange(ctx.redis, ctx.keys, {
        who: options.who ?? '',
        action,
        org,
        tokenId: null,
        details,
      }),
    );
  }
  return ids;
}

/** The one new run of a retry with a canary (none when nothing was selected). */
async function newCanaryRun(
  ctx: AppContext,
  orgs: readonly string[],
  canary: CanaryMeta,
): Promise<string | undefined> {
  if (orgs.length === 0) return undefined;
  const id = newRunId();
  await ctx.runs.create({
    id,
    kind: 'retry',
    source: `retry with a canary of ${canary.size}`,
    orgs: [...orgs],
    canary,
  });
  return id;
}

/**
 * The run a retried learner goes back into: its own, unless that run was compacted after RUN_RETENTION
 * (ops/actions/run-retention.ts): its counters are a summary now, so the learner starts a new run that says
 * where it came from.
 */
async function liveRun(ctx: AppContext, runId: string, org: string): Promise<string> {
  const meta = await ctx.runs.get(runId);
  if (!meta?.compacted) return runId;
  const id = newRunId();
  await ctx.runs.create({ id, kind: 'retry', source: `retry of compacted run ${runId}`, orgs: [org] });
  return id;
}
