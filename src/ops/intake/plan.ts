// plan: what a source would enqueue, classified as the producer would, and how long it would take
// (eta.ts, jobs already waiting counted first), with no queue writes and no transfer calls.
import { Queue } from 'bullmq';
import type { AppContext } from '../../app/context.ts';
import { tokensOf } from '../../core/config.ts';
import { humanizeMs } from '../../core/duration.ts';
import { etaOf, type Eta } from '../eta/eta.ts';
import { FREE_STEPS } from '../../limiter/budget-schedule.ts';
import type { BudgetView } from '../../limiter/types.ts';
import { CANCELLED, isFinalBucket, type Bucket } from '../../outcomes/record.ts';
import { jobCounts } from '../../queue/queues.ts';
import { readCsv } from '../../queue/sources/csv.ts';
import { FirstLines } from '../../queue/enqueue-csv.ts';
import { basename } from 'node:path';

export type PlanDeps = Pick<AppContext, 'config' | 'redis' | 'keys' | 'store' | 'budget'>;

export interface OrgPlan {
  org: string;
  /** Distinct learners the source named for this organization. */
  learners: number;
  /** Would get a job: new, or re-opened on purpose (reconcile). */
  toEnqueue: number;
  alreadyQueued: number;
  alreadyDone: number;
  /** Jobs waiting, delayed or active in the organization's queue now (spent before the new ones). */
  backlog: number;
  tokens: number;
  /** Budget usable now: the smaller of the org's and its tokens' remaining in their windows. */
  availableNow: number;
  /** Organization windows the work spans, the current one included. */
  periods: number;
  /** Length of one such window, ms. */
  periodMs: number;
  eta: Eta;
  /** `plan --tokens N`: the finish with N usable tokens instead. */
  whatIf?: { tokens: number; eta: Eta; text: string };
  text: string;
}

const n = (x: number) => x.toLocaleString('en-US');

/** The ETA of `work` learners and its wording, from the organization's peek (ops/eta/eta.ts). */
export function describeEta(
  org: string,
  learners: number,
  work: number,
  view: BudgetView,
  options: { tokens?: number } = {},
): { eta: Eta; periods: number; periodMs: number; text: string } {
  const head = `${n(learners)} learner${learners === 1 ? '' : 's'} for ${org}`;
  const eta = etaOf(view, work, options);
  const periodMs = view.org.windowMs;
  if (work <= 0) return { eta, periods: 0, periodMs, text: `${head}: nothing to transfer` };
  return { eta, periods: eta.windows, periodMs, text: `${head}: ${eta.text}` };
}

/** The what-if line of `plan --tokens N`: both finishes. */
function whatIfText(eta: Eta, other: Eta, tokens: number): string {
  const was = eta.finishUtc ? `${eta.finishUtc}, in ${humanizeMs(eta.ms)}` : eta.text;
  const would = other.finishUtc ? `${other.finishUtc}, in ${humanizeMs(other.ms)}` : other.text;
  const limited = other.limitedBy ? ` (limited by ${other.limitedBy})` : '';
  return `with ${tokens} token${tokens === 1 ? '' : 's'} instead of ${eta.tokens}: done by ${would}${limited}, against ${was}`;
}

/**
 * Plans learners per organization. `force`: final learners would be re-opened (reconcile). `tokens`:
 * also says when the work would finish with that many usable tokens (plan --tokens).
 */
export async function planOrgs(
  deps: PlanDeps,
  byOrg: ReadonlyMap<string, readonly number[]>,
  options: {
    force?: boolean;
    tokens?: number | undefined;
    /** A CSV's learners: one cancelled earlier is re-opened by the enqueue (producer reopenCancelled). */
    reopenCancelled?: boolean;
  } = {},
): Promise<OrgPlan[]> {
  const { config } = deps;
  const plans: OrgPlan[] = [];
  for (const [org, ids] of byOrg) {
    let toEnqueue = 0;
    let alreadyQueued = 0;
    let alreadyDone = 0;
    for (let i = 0; i < ids.length; i += 1000) {
      const records = await deps.store.getMany(org, ids.slice(i, i + 1000));
      for (const r of records) {
        if (!r) toEnqueue++;
        else if (!isFinalBucket(r.b as Bucket)) alreadyQueued++;
        else if (options.force || (options.reopenCancelled && r.b === CANCELLED)) toEnqueue++;
        else alreadyDone++;
      }
    }
    const backlog = await queueBacklog(deps, org);
    const tokenIds = tokensOf(config, org).map((t) => t.id);
    // At the limits every worker applies (the policy in Redis: limits, reserve, pauses), from a peek
    // that says when each counted permit leaves its window: the same ETA as status's (ops/eta/eta.ts).
    const view = await deps.budget.peekWithFrees(org, tokenIds, FREE_STEPS);
    const work = backlog + toEnqueue;
    const d = describeEta(org, ids.length, work, view);
    const availableNow = d.eta.availableNow;
    const whatIf = options.tokens !== undefined && work > 0 ? options.tokens : undefined;
    const other = whatIf === undefined ? undefined : etaOf(view, work, { tokens: whatIf });
    const extra = [
      toEnqueue !== ids.length ? `${n(toEnqueue)} to enqueue` : '',
      alreadyQueued ? `${n(alreadyQueued)} already queued` : '',
      alreadyDone ? `${n(alreadyDone)} already done` : '',
      backlog ? `after ${n(backlog)} jobs already in the queue` : '',
    ].filter(Boolean);
    plans.push({
      org,
      learners: ids.length,
      toEnqueue,
      alreadyQueued,
      alreadyDone,
      backlog,
      tokens: tokenIds.length,
      availableNow,
      periods: d.periods,
      periodMs: d.periodMs,
      eta: d.eta,
      ...(other && whatIf !== undefined
        ? { whatIf: { tokens: whatIf, eta: other, text: whatIfText(d.eta, other, whatIf) } }
        : {}),
      text: extra.length ? `${d.text} (${extra.join(', ')})` : d.text,
    });
  }
  return plans;
}

/**
 * Jobs already in the organization's queue. A Queue object of its own with skipMetasUpdate: the
 * shared QueueSet's queues write their meta key when created, and a plan writes nothing to a queue.
 */
async function queueBacklog(deps: PlanDeps, org: string): Promise<number> {
  const queue = new Queue(deps.keys.queueName(org), {
    connection: deps.redis,
    prefix: deps.keys.prefix,
    skipMetasUpdate: true,
  });
  try {
    const c = await jobCounts(queue as Parameters<typeof jobCounts>[0]);
    return c.waiting + c.delayed + c.active + c.prioritized;
  } finally {
    await queue.close();
  }
}

export function formatPlan(plans: readonly OrgPlan[], title: string): string {
  if (plans.length === 0) return `${title}: nothing to transfer`;
  return [
    `${title} (no queue writes, no transfer calls):`,
    ...plans.flatMap((p) => [`  ${p.text}`, ...(p.whatIf ? [`    ${p.whatIf.text}`] : [])]),
  ].join('\n');
}

export interface CsvPlan {
  plans: OrgPlan[];
  read: number;
  valid: number;
  rejected: number;
}

/** Reads a CSV as enqueue would (same reader, same in-file dedupe, same reasons) and plans it. */
export async function planCsv(
  deps: PlanDeps,
  options: {
    file: string;
    defaultOrg?: string | undefined;
    knownOrgs: readonly string[];
    /** Also plan with this many usable tokens (plan --tokens). */
    tokens?: number | undefined;
    /** Each rejected or repeated row, with the reason a real enqueue would give (its rejects file). */
    onReject?: ((line: number, reason: string) => void) | undefined;
  },
): Promise<CsvPlan> {
  const byOrg = new Map<string, number[]>();
  const seen = new FirstLines();
  const source = basename(options.file);
  let read = 0;
  let rejected = 0;
  const reject = (line: number, reason: string) => {
    rejected++;
    options.onReject?.(line, reason);
  };
  for await (const ev of readCsv(options)) {
    read++;
    if (ev.kind === 'reject') {
      reject(ev.line, ev.reason);
      continue;
    }
    const repeated = seen.repeatOf(ev, source);
    if (repeated !== undefined) {
      reject(ev.line, repeated);
      continue;
    }
    const ids = byOrg.get(ev.org) ?? [];
    ids.push(ev.learnerId);
    byOrg.set(ev.org, ids);
  }
  const valid = [...byOrg.values()].reduce((a, ids) => a + ids.length, 0);
  const plans = await planOrgs(deps, byOrg, { tokens: options.tokens, reopenCancelled: true });
  return { plans, read, valid, rejected };
}
