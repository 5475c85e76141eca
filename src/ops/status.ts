// The status of the whole tool: per organization, learners by state and outcome, queue counts, budget
// used and remaining per token and organization, and when the remaining work will be done.
import type { AppContext } from '../app/context.ts';
import { estimate, type Eta } from './eta.ts';
import type { BudgetView } from '../limiter/index.ts';
import { jobCounts, type JobCounts } from '../queue/queues.ts';
import { checkRedisWrites, type WriteState } from '../redis/writes.ts';
import type { RunCounts } from '../outcomes/store.ts';

export interface OrgStatus {
  org: string;
  learners: RunCounts;
  remaining: number;
  jobs: JobCounts;
  budget: BudgetView;
  eta: Eta;
}

export interface Status {
  at: string;
  limits: { perToken: string; perOrg: string };
  orgs: OrgStatus[];
  /** Whether Redis takes writes and how full it is; null when that could not be checked. */
  redis: WriteState | null;
}

/** The write state of the context's Redis; null when the check itself failed (not a refusal). */
export function redisWriteState(ctx: AppContext): Promise<WriteState | null> {
  return checkRedisWrites(ctx.redis, {
    probeKey: ctx.keys.writeProbe(),
    highWater: ctx.config.redisHighWater,
  }).catch(() => null);
}

export async function collectStatus(
  ctx: AppContext,
  orgs: readonly string[] = ctx.config.orgs,
): Promise<Status> {
  const redis = redisWriteState(ctx);
  const out: OrgStatus[] = [];
  for (const org of orgs) {
    const tokenIds = ctx.config.tokens.filter((t) => t.org === org).map((t) => t.id);
    const [learners, jobs, budget] = await Promise.all([
      ctx.store.orgCounts(org),
      jobCounts(ctx.queues.get(org)),
      ctx.budget.peek(org, tokenIds),
    ]);
    const remaining = (learners.queued ?? 0) + (learners.retrying ?? 0);
    const usableTokens = budget.tokens.filter((t) => !t.blocked);
    const tokensLeft = usableTokens.reduce((sum, t) => sum + t.remaining, 0);
    const eta = estimate({
      remaining,
      tokens: usableTokens.length,
      perToken: ctx.config.limitPerToken,
      perOrg: ctx.config.limitPerOrg,
      availableNow: budget.org.blocked ? 0 : Math.min(budget.org.remaining, tokensLeft),
    });
    out.push({ org, learners, remaining, jobs, budget, eta });
  }
  return {
    at: new Date().toISOString(),
    limits: {
      perToken: `${ctx.config.limitPerToken.max}/${ctx.config.limitPerToken.windowMs}ms`,
      perOrg: `${ctx.config.limitPerOrg.max}/${ctx.config.limitPerOrg.windowMs}ms`,
    },
    orgs: out,
    redis: await redis,
  };
}
