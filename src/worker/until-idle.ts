// What `work --until-idle` reads to decide that the work is over: the queues' jobs, the runs with learners
// waiting, the failures of the runs it served, and organizations whose every token is refused (401).
import type { AppContext } from '../app/context.ts';
import { progressOf } from '../outcomes/run-progress.ts';
import { hasJobs, laneJobs } from '../queue/lane-state.ts';

/** Runs (newest 500) that have learners queued or retrying in any of the organizations. */
export async function pendingRuns(ctx: AppContext, orgs: readonly string[]): Promise<string[]> {
  const runs = await ctx.runs.list(500);
  // One read per run and organization, all in flight together (ioredis pipelines them on one socket).
  const waiting = await Promise.all(
    runs.map(async (run) => {
      const counts = await Promise.all(orgs.map((org) => ctx.store.runCounts(org, run.id)));
      return counts.some((c) => progressOf(c).waiting > 0);
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

/** The organizations whose queue has a job waiting, active, delayed or prioritized, with their counts. */
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
