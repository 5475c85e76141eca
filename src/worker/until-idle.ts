// What `work --until-idle` reads to decide that the work is over.
import type { AppContext } from '../app/context.ts';
import { BREAKER } from '../limiter/breaker.ts';
import { progressOf } from '../outcomes/run-progress.ts';
import { hasJobs, laneJobs } from '../queue/lane-state.ts';
import type { RunCounts } from '../outcomes/store.ts';
import { canaryVerdict, DEFAULT_HALT_AT } from '../ops/actions/canary.ts';

/** A canary run whose learners await approval when `work --until-idle` found the work over. */
export interface AwaitingApproval {
  runId: string;
  awaiting: number;
  /** "waiting for approval after its canary (18 of 20 transferred, 2 failed)" */
  text: string;
}

/**
 * Runs (newest 500) that have learners queued or retrying in any of the organizations, or awaiting
 * approval after a canary (a person's act is pending: the run is not over).
 */
export async function pendingRuns(ctx: AppContext, orgs: readonly string[]): Promise<string[]> {
  const runs = await ctx.runs.list(500);
  // One read per run and organization, all in flight together (ioredis pipelines them on one socket).
  const waiting = await Promise.all(
    runs.map(async (run) => {
      const counts = await Promise.all(orgs.map((org) => ctx.store.runCounts(org, run.id)));
      return counts.some((c) => progressOf(c).waiting > 0 || progressOf(c).approval > 0);
    }),
  );
  return runs.filter((_, i) => waiting[i]).map((r) => r.id);
}

/** Learners in a failure state in these runs and organizations. */
export async function failuresIn(
  ctx: AppContext,
  runIds: readonly string[],
  orgs: readonly string[],
): Promise<number> {
  let n = 0;
  for (const runId of runIds) {
    for (const org of orgs) {
      n += progressOf(await ctx.store.runCounts(org, runId)).failed;
    }
  }
  return n;
}

/** Of these runs, those with learners awaiting approval in these organizations. */
export async function approvalsIn(
  ctx: AppContext,
  runIds: readonly string[],
  orgs: readonly string[],
): Promise<AwaitingApproval[]> {
  const out: AwaitingApproval[] = [];
  for (const runId of runIds) {
    const total: RunCounts = {};
    for (const c of await Promise.all(orgs.map((org) => ctx.store.runCounts(org, runId)))) {
      for (const [k, v] of Object.entries(c))
        total[k as keyof RunCounts] = (total[k as keyof RunCounts] ?? 0) + v;
    }
    const v = canaryVerdict(total, DEFAULT_HALT_AT);
    if (v.awaiting > 0) out.push({ runId, awaiting: v.awaiting, text: v.text });
  }
  return out;
}

/** The organizations whose queue has jobs, with their counts. */
export async function orgsWithJobs(
  ctx: AppContext,
  orgs: readonly string[],
): Promise<{ pendingOrgs: string[]; jobs: Record<string, unknown> }> {
  const pendingOrgs: string[] = [];
  const jobs: Record<string, unknown> = {};
  // One pipelined read for all of them, not one round trip per organization.
  for (const j of await laneJobs(ctx.redis, ctx.keys, orgs)) {
    if (!hasJobs(j)) continue;
    pendingOrgs.push(j.lane);
    if (pendingOrgs.length <= 20) jobs[j.lane] = { ready: j.ready, active: j.active, delayed: j.delayed };
  }
  return { pendingOrgs, jobs };
}

/** An organization the error budget halted, with the halt's reason in words. */
export interface HaltedOrg {
  org: string;
  reason: string;
}

/**
 * Of these organizations, those the error budget halted (paused by `breaker`): their work waits for a
 * person's `resume --org KEY`, which no worker will do. A person's own pause is not one: it is theirs to
 * lift, and a process told to work until idle waits for it as it always has.
 */
export async function haltedOrgs(ctx: AppContext, orgs: readonly string[]): Promise<HaltedOrg[]> {
  const out: HaltedOrg[] = [];
  for (const org of orgs) {
    const paused = (await ctx.budget.policy(org)).paused;
    if (paused?.who === BREAKER) out.push({ org, reason: paused.reason ?? 'no reason recorded' });
  }
  return out;
}

/** Of these organizations, those whose every token is refused (401): their work will never finish. */
export async function refusedOrgs(ctx: AppContext, orgs: readonly string[]): Promise<string[]> {
  const stuck: string[] = [];
  for (const org of orgs) {
    const tokenIds = ctx.tokens.tokensOf(org).map((t) => t.id);
    const view = await ctx.budget.peek(org, tokenIds);
    if (view.tokens.length > 0 && view.tokens.every((t) => t.blocked?.reason === '401')) stuck.push(org);
  }
  return stuck;
}
