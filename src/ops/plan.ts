// plan: what a source would enqueue and how long it would take, with no queue writes and no transfer
// calls. The learners come from a CSV, a dry-run crawl or a dry-run reconcile; each is classified the
// way the producer would (new, already queued, already done; a forced reconcile re-opens the done),
// and the ETA comes from eta.ts at the limits in effect (the organization's policy in Redis, read by the
// limiter peek, a read-only script) and the budget already used in the current window. Jobs already waiting in the organization's queue are
// spent first, so they count toward the ETA.
import { Queue } from 'bullmq';
import type { AppContext } from '../app/context.ts';
import { tokensOf } from '../core/config.ts';
import { formatRate, type Rate } from '../core/duration.ts';
import { estimate, type Eta } from './eta.ts';
import { paceOf } from '../limiter/policy.ts';
import { isFinalBucket, type Bucket } from '../outcomes/record.ts';
import { jobCounts } from '../queue/queues.ts';
import { readCsv } from '../queue/sources/csv.ts';

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
  /** Windows of the limit that sets the pace, the current one included. */
  periods: number;
  /** Length of one such window, ms. */
  periodMs: number;
  eta: Eta;
  text: string;
}

const NAMED: [number, string][] = [
  [86_400_000, 'day'],
  [3_600_000, 'hour'],
  [60_000, 'minute'],
  [1_000, 'second'],
];

function periodName(ms: number, plural: boolean): string {
  const named = NAMED.find(([size]) => size === ms)?.[1];
  if (named) return plural ? `${named}s` : named;
  return `${plural ? 'windows' : 'window'} of ${formatRate({ max: 1, windowMs: ms }).slice(2)}`;
}

function rateText(rate: Rate): string {
  const named = NAMED.find(([size]) => size === rate.windowMs)?.[1];
  return named ? `${rate.max}/${named}` : formatRate(rate);
}

const n = (x: number) => x.toLocaleString('en-US');

/**
 * The number of windows the work spans and the wording, from estimate(): the current window (with what
 * is left of it) plus one full window per `capacity` learners after it.
 */
export function describeEta(
  org: string,
  learners: number,
  work: number,
  tokens: number,
  perToken: Rate,
  perOrg: Rate,
  availableNow: number,
): { eta: Eta; periods: number; periodMs: number; text: string } {
  const head = `${n(learners)} learner${learners === 1 ? '' : 's'} for ${org}`;
  if (perOrg.max <= 0 && work > 0 && tokens > 0) {
    // `limits set --reserve` as large as the organization's limit: this tool may spend nothing.
    const text = 'never at these limits: the reserve leaves this tool nothing';
    return {
      eta: { ms: Infinity, boundBy: 'org', availableNow: 0, text },
      periods: Infinity,
      periodMs: perOrg.windowMs,
      text: `${head}: ${text}`,
    };
  }
  const eta = estimate({ remaining: work, tokens, perToken, perOrg, availableNow });
  const byToken = eta.boundBy === 'token';
  const periodMs = byToken ? perToken.windowMs : perOrg.windowMs;
  if (work <= 0) return { eta, periods: 0, periodMs, text: `${head}: nothing to transfer` };
  if (tokens === 0) return { eta, periods: Infinity, periodMs, text: `${head}: ${eta.text}` };
  const periods = 1 + Math.round(eta.ms / periodMs);
  const pace = byToken ? `${tokens} token${tokens > 1 ? 's' : ''} x ${rateText(perToken)}` : rateText(perOrg);
  const first = periodName(periodMs, false);
  const text =
    periods === 1
      ? `${head}: within the current ${first} (${n(eta.availableNow)} left)`
      : `${head}: ${n(periods)} ${periodName(periodMs, true)} at ${pace}, first ${first} ${n(eta.availableNow)} left`;
  return { eta, periods, periodMs, text };
}

/** Plans learners per organization. `force`: final learners would be re-opened (reconcile). */
export async function planOrgs(
  deps: PlanDeps,
  byOrg: ReadonlyMap<string, readonly number[]>,
  options: { force?: boolean } = {},
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
        else if (options.force) toEnqueue++;
        else alreadyDone++;
      }
    }
    const backlog = await queueBacklog(deps, org);
    const tokenIds = tokensOf(config, org).map((t) => t.id);
    // At the limits every worker applies (the policy in Redis: limits, reserve, pauses), from a peek.
    const view = await deps.budget.peek(org, tokenIds);
    const pace = paceOf(view);
    const availableNow = pace.availableNow;
    const d = describeEta(
      org,
      ids.length,
      backlog + toEnqueue,
      pace.tokens,
      pace.perToken,
      pace.perOrg,
      availableNow,
    );
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
  return [`${title} (no queue writes, no transfer calls):`, ...plans.map((p) => `  ${p.text}`)].join('\n');
}

export interface CsvPlan {
  plans: OrgPlan[];
  read: number;
  valid: number;
  rejected: number;
}

/** Reads a CSV as enqueue would (same reader, same in-file dedupe) and plans it. */
export async function planCsv(
  deps: PlanDeps,
  options: { file: string; defaultOrg?: string | undefined; knownOrgs: readonly string[] },
): Promise<CsvPlan> {
  const byOrg = new Map<string, Set<number>>();
  let read = 0;
  let rejected = 0;
  for await (const ev of readCsv(options)) {
    read++;
    if (ev.kind === 'reject') {
      rejected++;
      continue;
    }
    const ids = byOrg.get(ev.org) ?? new Set<number>();
    if (ids.has(ev.learnerId)) rejected++;
    ids.add(ev.learnerId);
    byOrg.set(ev.org, ids);
  }
  const lists = new Map([...byOrg].map(([org, ids]) => [org, [...ids]] as const));
  const valid = [...lists.values()].reduce((a, ids) => a + ids.length, 0);
  return { plans: await planOrgs(deps, lists), read, valid, rejected };
}
