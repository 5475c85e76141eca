// A crawl as an operator runs it (the crawl command, plan --crawl): the tokens bound to their
// organizations, the target's numeric id resolved, the list walked, and in a dry run the selection
// planned at the limits and budget of now.
import type { AppContext } from '../app/context.ts';
import { tokensOf } from '../core/config.ts';
import { LearnerTransferError } from '../core/errors.ts';
import { bindTokens } from '../limiter/token-orgs.ts';
import { OrgIds } from '../queue/org-ids.ts';
import { crawl, type CrawlOptions, type CrawlSummary } from '../queue/sources/crawl.ts';
import { planOrgs, type OrgPlan } from './plan.ts';

export interface CrawlRunOptions extends Pick<
  CrawlOptions,
  'org' | 'filters' | 'crawlId' | 'restart' | 'concurrency' | 'signal' | 'onProgress' | 'onRetry'
> {
  /** --target-org-id: remembered in Redis (except in a dry run); the remembered one otherwise. */
  targetOrgId?: number | undefined;
  dryRun: boolean;
}

export interface CrawlRun {
  summary: CrawlSummary;
  /** A dry run's plan of the selected learners. */
  plans: OrgPlan[] | undefined;
}

export function requireClient(ctx: Pick<AppContext, 'client'>) {
  if (!ctx.client)
    throw new LearnerTransferError('LT_USAGE', 'LEARNER_API_BASE_URL is required to read the learner list');
  return ctx.client;
}

export async function runCrawl(ctx: AppContext, options: CrawlRunOptions): Promise<CrawlRun> {
  const { org, dryRun } = options;
  const config = ctx.config;
  await bindTokens(ctx.redis, ctx.keys.prefix, config.tokens, { dryRun, logger: ctx.logger });
  const targetOrgId = await new OrgIds(ctx.redis, ctx.keys).resolve(
    org,
    options.targetOrgId,
    '--target-org-id N',
    dryRun,
  );
  const summary = await crawl(
    { redis: ctx.redis, keys: ctx.keys, producer: ctx.producer, runs: ctx.runs, client: requireClient(ctx) },
    {
      org,
      targetOrgId,
      tokens: tokensOf(config, org).map((t) => t.secret),
      filters: options.filters,
      crawlId: options.crawlId,
      restart: options.restart,
      dryRun,
      concurrency: options.concurrency,
      maxPages: config.crawlMaxPages,
      signal: options.signal,
      ...(options.onProgress ? { onProgress: options.onProgress } : {}),
      ...(options.onRetry ? { onRetry: options.onRetry } : {}),
    },
  );
  const plans = dryRun ? await planOrgs(ctx, new Map([[org, summary.selectedIds ?? []]])) : undefined;
  return { summary, plans };
}
