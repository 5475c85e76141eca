// The status of the whole tool, per organization: learners, queue counts, budget used and left,
// and the ETA. A fleet of 1,000 organizations costs one round trip per Redis node
// (redis/batch.ts), plus one for the ETA where there is work left.
import type { ReadContext } from '../../app/read-context.ts';
import { etaOf, type Eta } from '../eta/eta.ts';
import { runWindowOf, type RunWindowState } from './limits.ts';
import type { BudgetView } from '../../limiter/index.ts';
import { FREE_STEPS } from '../../limiter/budget-schedule.ts';
import type { JobCounts } from '../../queue/queues.ts';
import { addReads, hashOf, readBatched } from '../../redis/batch.ts';
import { checkRedisWrites, type WriteState } from '../../redis/writes.ts';
import type { RunCounts } from '../../outcomes/store.ts';
import type { Bucket } from '../../outcomes/record.ts';
import type { RunMeta } from '../../outcomes/runs.ts';
import { formatRate, humanizeMs } from '../../core/duration.ts';
import { approvalWaits, type ApprovalWait } from '../actions/canary.ts';

export interface OrgStatus {
  org: string;
  learners: RunCounts;
  remaining: number;
  jobs: JobCounts;
  budget: BudgetView;
  eta: Eta;
  /** The run window and whether it is open now (null: none set, any hour). */
  runWindow: RunWindowState | null;
  /** Canary runs awaiting approval (docs/canary.md); `eta` leaves their learners out. */
  approval?: ApprovalWait[] | undefined;
}

export interface Status {
  at: string;
  /** LIMIT_* of this process, and which of them its environment set. */
  limits: { perToken: string; perOrg: string; set: ('LIMIT_PER_TOKEN' | 'LIMIT_PER_ORG')[] };
  orgs: OrgStatus[];
  /** Whether Redis takes writes and how full it is; null when that could not be checked. */
  redis: WriteState | null;
}

/** The write state of the context's Redis; null when the check itself failed (not a refusal). */
export function redisWriteState(ctx: ReadContext): Promise<WriteState | null> {
  return checkRedisWrites(ctx.redis, {
    probeKey: ctx.keys.writeProbe(),
    highWater: ctx.config.redisHighWater,
  }).catch(() => null);
}

/** BullMQ's lists and sets of a queue, as getJobCounts names them. */
const JOB_READS = [
  ['waiting', 'wait', 'llen'],
  ['active', 'active', 'llen'],
  ['delayed', 'delayed', 'zcard'],
  ['failed', 'failed', 'zcard'],
  ['prioritized', 'prioritized', 'zcard'],
] as const;

function countsOf(raw: Record<string, string>): RunCounts {
  const out: RunCounts = {};
  for (const [b, v] of Object.entries(raw)) if (Number(v) !== 0) out[b as Bucket] = Number(v);
  return out;
}

interface CountsRead {
  learners: RunCounts;
  jobs: JobCounts;
  /** The counters of the runs asked for that span this organization, by run id. */
  runs: Map<string, RunCounts>;
}

/** Counters and job counts of many organizations: one call each (one slot), per node. */
async function readCounts(
  ctx: ReadContext,
  orgs: readonly string[],
  runs: readonly RunMeta[],
): Promise<CountsRead[]> {
  const k = ctx.keys;
  return readBatched(
    ctx.redis,
    orgs.map((org) => {
      const queue = k.queueName(org);
      const mine = runs.filter((r) => r.orgs.includes(org)).map((r) => r.id);
      return {
        slotKey: k.orgCounts(org),
        add: (pipe) =>
          addReads(pipe, [
            [k.orgCounts(org), 'hgetall'],
            ...JOB_READS.map(([, suffix, how]) => [k.queueKey(queue, suffix), how] as const),
            ...mine.map((id) => [k.runCounters(org, id), 'hgetall'] as const),
          ]),
        read: (replies) => {
          const r = (replies[0] ?? []) as unknown[];
          const jobs = {} as JobCounts;
          JOB_READS.forEach(([name], i) => (jobs[name] = Number(r[i + 1] ?? 0)));
          const counts = new Map<string, RunCounts>();
          mine.forEach((id, i) => counts.set(id, countsOf(hashOf(r[JOB_READS.length + 1 + i]))));
          return { learners: countsOf(hashOf(r[0])), jobs, runs: counts };
        },
      };
    }),
  );
}

/** The status of these organizations, and in the same calls these runs' counters. */
export async function readStatus(
  ctx: ReadContext,
  orgs: readonly string[] = ctx.config.orgs,
  runs: readonly RunMeta[] = [],
): Promise<{ status: Status; runCounts: (runId: string, org: string) => RunCounts }> {
  const redis = redisWriteState(ctx);
  const tokenIds = new Map<string, string[]>();
  for (const t of ctx.config.tokens) tokenIds.set(t.org, [...(tokenIds.get(t.org) ?? []), t.id]);
  const scopeOf = (org: string) => ({ org, tokenIds: tokenIds.get(org) ?? [] });
  const [counts, budgets] = await Promise.all([
    readCounts(ctx, orgs, runs),
    ctx.budget.peekMany(orgs.map(scopeOf)),
  ]);
  const remainingOf = (i: number) => {
    const { learners } = counts[i] as CountsRead;
    return (learners.queued ?? 0) + (learners.retrying ?? 0);
  };
  // The ETA needs when each counted permit leaves its window: one more round trip, only for
  // organizations with work left and permits in a window.
  const busy = orgs.flatMap((org, i) => {
    const b = budgets[i] as BudgetView;
    const counted = [b.org, ...b.tokens].some((s) => s.used + s.inflight > 0);
    return remainingOf(i) > 0 && counted ? [i] : [];
  });
  if (busy.length > 0) {
    const frees = await ctx.budget.peekFreesMany(
      busy.map((i) => ({ ...scopeOf(orgs[i] as string), view: budgets[i] as BudgetView })),
      FREE_STEPS,
    );
    busy.forEach((i, k) => (budgets[i] = { ...(budgets[i] as BudgetView), frees: frees[k] }));
  }
  const byOrg = new Map<string, CountsRead>();
  const out = orgs.map((org, i): OrgStatus => {
    const { learners, jobs } = counts[i] as CountsRead;
    byOrg.set(org, counts[i] as CountsRead);
    const { frees: _frees, ...budget } = budgets[i] as BudgetView;
    const remaining = remainingOf(i);
    // At the limits every worker applies (the policy in Redis), the same function as plan's.
    const eta = etaOf(budgets[i] as BudgetView, remaining);
    return { org, learners, remaining, jobs, budget, eta, runWindow: runWindowOf(budget, budget.now) };
  });
  await withApprovals(ctx, out, budgets);
  const status: Status = {
    at: new Date().toISOString(),
    limits: {
      // As a person writes them (100/1h), as LIMIT_* and `limits set` take them.
      perToken: formatRate(ctx.config.limitPerToken),
      perOrg: formatRate(ctx.config.limitPerOrg),
      // A config built without the list (a caller's own) is taken as setting both.
      set: (ctx.config.limitVariablesSet ?? ['LIMIT_PER_TOKEN', 'LIMIT_PER_ORG']).filter(
        (v): v is 'LIMIT_PER_TOKEN' | 'LIMIT_PER_ORG' => v !== 'LIMIT_BURST',
      ),
    },
    orgs: out,
    redis: await redis,
  };
  return { status, runCounts: (runId, org) => byOrg.get(org)?.runs.get(runId) ?? {} };
}

/** Each organization's canary runs awaiting approval, and their ETA counted from the approval. */
async function withApprovals(
  ctx: ReadContext,
  out: OrgStatus[],
  budgets: readonly BudgetView[],
): Promise<void> {
  const waits = await approvalWaits(ctx, out);
  out.forEach((o, i) => {
    const list = waits.get(o.org);
    if (!list) return;
    o.approval = list;
    const awaiting = list.reduce((a, w) => a + w.awaiting, 0);
    const after = etaOf(budgets[i] as BudgetView, awaiting);
    const then = Number.isFinite(after.ms)
      ? `then ${humanizeMs(after.ms)} after the approval at these limits`
      : after.text;
    const waiting = list.map((w) => `run ${w.runId} ${w.verdict.text}`).join('; ');
    o.eta = {
      ...o.eta,
      text:
        o.remaining > 0 ? `${o.eta.text}; then ${waiting}` : `${waiting}: no finish until approved (${then})`,
    };
  });
}

export async function collectStatus(
  ctx: ReadContext,
  orgs: readonly string[] = ctx.config.orgs,
): Promise<Status> {
  return (await readStatus(ctx, orgs)).status;
}
