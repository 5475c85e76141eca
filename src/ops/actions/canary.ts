// Approving a `--canary N` run (docs/canary.md), by a person or by the worker that records the
// canary's last outcome within the error budget: its waiting learners are queued.
import type { AppContext } from '../../app/context.ts';
import type { ReadContext } from '../../app/read-context.ts';
import type { HaltAt } from '../../core/halt-rule.ts';
import { LearnerTransferError } from '../../core/errors.ts';
import { appendChange, workActor } from '../../limiter/control-log.ts';
import { OUTCOME_CODES, OUTCOMES } from '../../outcomes/codes.ts';
import { AWAITING_APPROVAL, type Bucket } from '../../outcomes/record.ts';
import { progressOf } from '../../outcomes/run-progress.ts';
import type { RunMeta } from '../../outcomes/runs.ts';
import type { RunCounts } from '../../outcomes/store.ts';
import { JOB_NAME, jobIdOf, type TransferJob } from '../../queue/job.ts';
import { LanesDue } from '../../queue/lanes-due.ts';

/** The share of failures at which a canary is not approved by itself: HALT_AT's default. */
export const DEFAULT_HALT_AT = 0.5;

/** HALT_AT as a share (0 < s <= 1), 'off' as Infinity: a canary and a halt judge alike. */
export function haltShareOf(at: HaltAt): number {
  return at === 'off' ? Number.POSITIVE_INFINITY : at / 100;
}

/**
 * Final outcomes the error budget counts as failures (docs/guard-rails.md): the outcome table's
 * `halt` column. A canary's learners came from the run itself, so not-found counts here.
 */
export const BUDGET_FAILURES: readonly Bucket[] = OUTCOME_CODES.filter((code) => {
  const halt = OUTCOMES[code].halt;
  return halt === 'failure' || halt === 'at-once' || halt === 'not-found';
});

export interface CanaryVerdict {
  /** Learners of the canary sent or being sent: neither awaiting approval nor cancelled. */
  sent: number;
  /** Of those: transferred or already there, failed, still waiting. */
  done: number;
  failed: number;
  waiting: number;
  /** Learners awaiting approval. */
  awaiting: number;
  /** Failures as the error budget counts them, and the outcomes it judges. */
  budgetFailures: number;
  judged: number;
  /** The canary is over (nothing of it waits) and its failures are below the share. */
  withinBudget: boolean;
  /** "waiting for approval after its canary (18 of 20 transferred, 2 failed)", or while it runs. */
  text: string;
}

/** "18 of 20 transferred, 2 failed" (and ", 3 in progress" while the canary runs). */
export function canaryCounts(v: { done: number; sent: number; failed: number; waiting: number }): string {
  return (
    `${v.done} of ${v.sent} transferred, ${v.failed} failed` +
    (v.waiting > 0 ? `, ${v.waiting} in progress` : '')
  );
}

/** A canary run's counters in one organization (or summed), judged at `share`. */
export function canaryVerdict(counts: RunCounts, share: number): CanaryVerdict {
  const p = progressOf(counts);
  const budgetFailures = BUDGET_FAILURES.reduce((a, b) => a + (counts[b] ?? 0), 0);
  const judged = budgetFailures + p.done;
  const sent = p.done + p.failed + p.waiting;
  const withinBudget = p.waiting === 0 && judged > 0 && budgetFailures < Math.ceil(share * judged);
  const counted = canaryCounts({ done: p.done, sent, failed: p.failed, waiting: p.waiting });
  const text =
    p.waiting > 0
      ? `sending its canary (${counted}); ${p.approval} then wait for approval`
      : `waiting for approval after its canary (${counted})`;
  return {
    sent,
    done: p.done,
    failed: p.failed,
    waiting: p.waiting,
    awaiting: p.approval,
    budgetFailures,
    judged,
    withinBudget,
    text,
  };
}

export interface ApproveSummary {
  runId: string;
  dryRun: boolean;
  /** Learners released (with dryRun: awaiting approval, that would be). */
  released: number;
  byOrg: Record<string, number>;
  /** The change-log entry (none for a dry run). */
  changeId: string | null;
}

export interface ApproveOptions {
  /** Only these organizations of the run (default: all of them). */
  orgs?: readonly string[] | undefined;
  dryRun?: boolean | undefined;
  /** The auto-approval's verdict, for the change log (absent: a person approved). */
  auto?: string | undefined;
}

/** The run, refused with a clear message when it does not exist or is not a canary run. */
export async function canaryRun(ctx: AppContext, runId: string): Promise<RunMeta> {
  const run = await ctx.runs.get(runId);
  if (!run) throw new LearnerTransferError('LT_USAGE', `--run ${runId}: no such run`);
  if (!run.canary) {
    throw new LearnerTransferError(
      'LT_USAGE',
      `--run ${runId}: not a canary run (made without --canary): none of its learners waits for approval`,
    );
  }
  return run;
}

/** Releases the learners of a canary run that await approval; `who` is the change log's author. */
export async function approveRun(
  ctx: AppContext,
  runId: string,
  who: string,
  options: ApproveOptions = {},
): Promise<ApproveSummary> {
  const run = await canaryRun(ctx, runId);
  const dryRun = options.dryRun === true;
  const orgs = options.orgs ? run.orgs.filter((o) => options.orgs?.includes(o)) : run.orgs;
  const summary: ApproveSummary = { runId, dryRun, released: 0, byOrg: {}, changeId: null };
  const at = new Date().toISOString();
  for (const org of orgs) {
    const waiting = await awaitingOf(ctx, org, runId);
    const n = dryRun ? waiting.size : await release(ctx, org, runId, waiting);
    if (!dryRun) await ctx.runs.noteApproved(runId, org, { at, by: who });
    if (n === 0) continue;
    summary.released += n;
    summary.byOrg[org] = n;
  }
  if (dryRun) return summary;
  summary.changeId = await appendChange(ctx.redis, ctx.keys, {
    who,
    action: 'run.approve',
    org: orgs.length === 1 ? (orgs[0] as string) : null,
    tokenId: null,
    details: {
      run: runId,
      released: summary.released,
      byOrg: summary.byOrg,
      ...(options.auto ? { auto: options.auto } : {}),
    },
  });
  return summary;
}

/** The run's learners awaiting approval in one organization. */
async function awaitingOf(ctx: AppContext, org: string, runId: string): Promise<Map<number, string>> {
  const out = new Map<number, string>();
  const ids = await ctx.store.bucketPage(org, AWAITING_APPROVAL, 0, Number.MAX_SAFE_INTEGER - 1);
  for (let i = 0; i < ids.length; i += 1000) {
    const chunk = ids.slice(i, i + 1000);
    const records = await ctx.store.getMany(org, chunk);
    records.forEach((r, j) => {
      if (r && r.b === AWAITING_APPROVAL && r.r === runId) out.set(chunk[j] as number, r.src ?? 'approve');
    });
  }
  return out;
}

/**
 * Moves them to `queued`, then adds their jobs (after a crash between the two the repair sweep
 * adds them), and marks the organization due.
 */
async function release(ctx: AppContext, org: string, runId: string, waiting: Map<number, string>) {
  const moved = await ctx.store.approve(org, runId, [...waiting.keys()]);
  const queue = ctx.queues.get(org);
  for (let i = 0; i < moved.length; i += 1000) {
    await queue.addBulk(
      moved.slice(i, i + 1000).map((learnerId) => ({
        name: JOB_NAME,
        data: { org, learnerId, runId, source: waiting.get(learnerId) ?? 'approve' } satisfies TransferJob,
        opts: { jobId: jobIdOf(learnerId) },
      })),
    );
  }
  if (moved.length > 0) await new LanesDue(ctx.redis, ctx.keys).markDue([org]);
  await ctx.redis.hdel(ctx.keys.canaryRuns(org), runId);
  return moved.length;
}

/**
 * The auto-approval, after a canary learner's final outcome: once the canary is over in `org`,
 * releases the waiting learners if its failures are below the halt share, else notes why not.
 * Of two workers finishing at once, one approves (Runs.noteApproved with `first`).
 */
export async function autoApprove(
  ctx: AppContext,
  org: string,
  runId: string,
  share: number,
): Promise<'approved' | 'refused' | 'not-yet' | 'no'> {
  const run = await ctx.runs.get(runId);
  if (!run?.canary?.autoApprove || run.canary.approved[org]) return 'no';
  const counts = await ctx.store.runCounts(org, runId);
  // The organization's own error budget (`limits set --halt-at`) where it has one.
  const own = (await ctx.budget.policy(org)).haltAt;
  const judgedAt = own === null ? share : haltShareOf(own);
  const v = canaryVerdict(counts, judgedAt);
  if (v.waiting > 0 || v.awaiting === 0) return 'not-yet';
  if (!v.withinBudget) {
    const off = own === null ? 'HALT_AT off' : `${org}'s --halt-at off`;
    const why =
      `${v.budgetFailures} of ${v.judged} judged outcomes of the canary failed ` +
      `(${judgedAt === Number.POSITIVE_INFINITY ? off : `at least ${Math.ceil(judgedAt * v.judged)} halt`})`;
    await ctx.runs.noteCanaryRefused(runId, org, why);
    ctx.logger.warn(
      { org, runId, failures: v.budgetFailures, judged: v.judged },
      `run ${runId} is not approved by itself in ${org}: ${why}; it waits for a person (approve --run ${runId})`,
    );
    return 'refused';
  }
  const who = workActor();
  const at = new Date().toISOString();
  if (!(await ctx.runs.noteApproved(runId, org, { at, by: who }, true))) return 'no';
  const auto = `auto-approved: ${v.budgetFailures} of ${v.judged} judged outcomes of the canary failed`;
  const s = await approveRun(ctx, runId, who, { orgs: [org], auto });
  ctx.logger.info({ org, runId, released: s.released }, `run ${runId} ${auto}: ${s.released} released`);
  return 'approved';
}

export interface ApprovalWait {
  runId: string;
  /** Learners of the run awaiting approval in the organization. */
  awaiting: number;
  verdict: CanaryVerdict;
}

/** Each organization's canary runs awaiting approval (an idle fleet reads nothing more). */
export async function approvalWaits(
  ctx: ReadContext,
  orgs: readonly { org: string; learners: RunCounts }[],
): Promise<Map<string, ApprovalWait[]>> {
  const out = new Map<string, ApprovalWait[]>();
  const waiting = orgs.filter((o) => (o.learners[AWAITING_APPROVAL] ?? 0) > 0);
  await Promise.all(
    waiting.map(async ({ org }) => {
      const runIds = Object.keys(await ctx.redis.hgetall(ctx.keys.canaryRuns(org))).slice(0, 20);
      const counts = await Promise.all(runIds.map((id) => ctx.store.runCounts(org, id)));
      const list = runIds
        .map((runId, i) => {
          const verdict = canaryVerdict(counts[i] ?? {}, DEFAULT_HALT_AT);
          return { runId, awaiting: verdict.awaiting, verdict };
        })
        .filter((w) => w.awaiting > 0);
      if (list.length > 0) out.set(org, list);
    }),
  );
  return out;
}
