// A run's progress, overall and per organization, from its counters: one call per organization and one
// pipeline per Redis node, not a round trip per organization and run.
import type { AppContext } from '../../app/context.ts';
import type { Bucket } from '../../outcomes/record.ts';
import { progressOf, type RunProgress } from '../../outcomes/run-progress.ts';
import type { RunMeta } from '../../outcomes/runs.ts';
import type { RunCounts } from '../../outcomes/store.ts';
import { addReads, hashOf, readBatched } from '../../redis/batch.ts';

export interface RunOverview extends RunMeta {
  progress: RunProgress;
  counts: RunCounts;
  /** Per organization: every one of the run's, or (in the overview) the few worth showing (trimRun). */
  byOrg: Record<string, { progress: RunProgress; counts: RunCounts }>;
  /** Organizations of the run, however many `byOrg` holds. */
  orgCount: number;
}

function countsOf(raw: Record<string, string>): RunCounts {
  const out: RunCounts = {};
  for (const [k, v] of Object.entries(raw)) if (Number(v) !== 0) out[k as Bucket] = Number(v);
  return out;
}

/** The runs' overviews from their counters per organization (read by the caller, in batches). */
export function runOverviewsFrom(
  runs: readonly RunMeta[],
  countsOf: (runId: string, org: string) => RunCounts,
): RunOverview[] {
  return runs.map((run) => {
    const byOrg: RunOverview['byOrg'] = {};
    const total: RunCounts = {};
    for (const org of run.orgs) {
      const c = countsOf(run.id, org);
      byOrg[org] = { progress: progressOf(c), counts: c };
      for (const [k, v] of Object.entries(c))
        total[k as keyof RunCounts] = (total[k as keyof RunCounts] ?? 0) + v;
    }
    return { ...run, progress: progressOf(total), counts: total, byOrg, orgCount: run.orgs.length };
  });
}

/** The runs' counters: one call per organization, one pipeline per node. */
export async function runOverviews(ctx: AppContext, runs: readonly RunMeta[]): Promise<RunOverview[]> {
  const orgs = [...new Set(runs.flatMap((r) => r.orgs))];
  const read = await readBatched(
    ctx.redis,
    orgs.map((org) => {
      const ids = runs.filter((r) => r.orgs.includes(org)).map((r) => r.id);
      return {
        slotKey: ctx.keys.runCounters(org, ids[0] ?? ''),
        add: (pipe) =>
          addReads(
            pipe,
            ids.map((id) => [ctx.keys.runCounters(org, id), 'hgetall'] as const),
          ),
        read: (replies) => {
          const r = (replies[0] ?? []) as unknown[];
          return new Map(ids.map((id, i) => [id, countsOf(hashOf(r[i]))]));
        },
      };
    }),
  );
  const byOrg = new Map(orgs.map((org, i) => [org, read[i]]));
  return runOverviewsFrom(runs, (runId, org) => byOrg.get(org)?.get(runId) ?? {});
}

export async function runOverview(ctx: AppContext, run: RunMeta): Promise<RunOverview> {
  return (await runOverviews(ctx, [run]))[0] as RunOverview;
}

/**
 * The run with at most `max` organizations in `byOrg`: those with learners waiting, then those with
 * failures, then the rest, in the run's order. The overview shows these; /api/runs/:id has them all.
 */
export function trimRun(run: RunOverview, max: number): RunOverview {
  const entries = Object.entries(run.byOrg);
  if (entries.length <= max) return run;
  const weight = ([, v]: (typeof entries)[number]) =>
    v.progress.waiting > 0 ? 0 : v.progress.failed > 0 ? 1 : 2;
  const kept = entries
    .map((e, i) => ({ e, i }))
    .sort((a, b) => weight(a.e) - weight(b.e) || a.i - b.i)
    .slice(0, max)
    .sort((a, b) => a.i - b.i)
    .map((x) => x.e);
  return { ...run, byOrg: Object.fromEntries(kept) };
}
