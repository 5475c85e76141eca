// A crawl as an operator runs it (`crawl`, `plan --crawl`): tokens bound, the target's id resolved, the
// list walked; a dry run plans the selection at today's limits.
import type { AppContext } from '../../app/context.ts';
import { tokensOf } from '../../core/config.ts';
import { LearnerTransferError } from '../../core/errors.ts';
import { bindTokens } from '../../limiter/token-orgs.ts';
import type { Logger } from '../../core/log.ts';
import { OrgIds } from '../../queue/org-ids.ts';
import { crawl, type CrawlOptions, type CrawlSummary } from '../../queue/sources/crawl.ts';
import { describeOrgIdEvent, type OrgIdEvent, type OrgIdSource } from '../../queue/sources/crawl-org-id.ts';
import { planOrgs, type OrgPlan } from './plan.ts';

export interface CrawlRunOptions extends Pick<
  CrawlOptions,
  | 'org'
  | 'filters'
  | 'crawlId'
  | 'restart'
  | 'concurrency'
  | 'readAhead'
  | 'batchPages'
  | 'signal'
  | 'onProgress'
  | 'onRetry'
  | 'canary'
> {
  /**
   * --target-org-id: remembered in Redis (except in a dry run); the remembered one otherwise; with
   * --from-org and neither, learned from the list.
   */
  targetOrgId?: number | undefined;
  dryRun: boolean;
  /** plan --crawl --tokens N: the dry run's plan also says when N usable tokens would finish. */
  whatIfTokens?: number | undefined;
  /** Hears what the list said of the target's id (default: logged). */
  onOrgId?: ((e: OrgIdEvent) => void) | undefined;
}

export interface CrawlRun {
  summary: CrawlSummary;
  /** A dry run's plan of the selected learners. */
  plans: OrgPlan[] | undefined;
  /** What the list said of the target's id, as lines for the operator. */
  notes: string[];
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
  const orgIds = new OrgIds(ctx.redis, ctx.keys);
  const notes: string[] = [];
  const target = await targetIdOf(orgIds, options, ctx.logger, notes);
  const onOrgId = (e: OrgIdEvent) => {
    if (e.kind !== 'confirmed') notes.push(describeOrgIdEvent(e));
    logOrgIdEvent(ctx.logger, e);
    options.onOrgId?.(e);
  };
  const summary = await crawl(
    {
      redis: ctx.redis,
      keys: ctx.keys,
      producer: options.canary ? ctx.producer.withDefaults({ canary: options.canary.size }) : ctx.producer,
      runs: ctx.runs,
      client: requireClient(ctx),
      store: ctx.store,
      orgIds,
    },
    {
      org,
      targetOrgId: target?.id,
      targetOrgIdSource: target?.source,
      onOrgId,
      tokens: tokensOf(config, org).map((t) => t.secret),
      filters: options.filters,
      crawlId: options.crawlId,
      restart: options.restart,
      canary: options.canary,
      dryRun,
      concurrency: options.concurrency,
      readAhead: options.readAhead,
      batchPages: options.batchPages,
      maxPages: config.crawlMaxPages,
      signal: options.signal,
      ...(options.onProgress ? { onProgress: options.onProgress } : {}),
      ...(options.onRetry ? { onRetry: options.onRetry } : {}),
    },
  );
  const plans = dryRun
    ? await planOrgs(ctx, new Map([[org, summary.selectedIds ?? []]]), { tokens: options.whatIfTokens })
    : undefined;
  return { summary, plans, notes };
}

/**
 * The target's id: --target-org-id (remembered, except in a dry run; one that replaces another id is
 * said), else the remembered one, else none when --from-org lets the crawl learn it, else an error.
 */
async function targetIdOf(
  orgIds: OrgIds,
  options: CrawlRunOptions,
  logger: Logger,
  notes: string[],
): Promise<{ id: number; source: OrgIdSource } | undefined> {
  const { org, targetOrgId: given, dryRun } = options;
  const known = await orgIds.get(org);
  if (given !== undefined) {
    await (dryRun ? orgIds.check({ [org]: given }) : orgIds.set({ [org]: given }));
    if (known !== undefined && known !== given) {
      const note =
        `--target-org-id ${given} replaces ${known}, the organization id of '${org}' remembered in Redis` +
        (dryRun ? ' (for this dry run only)' : '');
      notes.push(note);
      logger.warn({ org, given, remembered: known }, note);
    }
    return { id: given, source: 'given' };
  }
  if (known !== undefined) {
    // Remembered before ids were checked, another key may share it.
    await orgIds.check({ [org]: known });
    return { id: known, source: 'remembered' };
  }
  if (options.filters.fromOrgId !== undefined) return undefined;
  throw new LearnerTransferError(
    'LT_USAGE',
    `the numeric organization id of '${org}' is not known, so learners already in it cannot be told ` +
      `apart: give --target-org-id N once (it is remembered in Redis for later runs), or crawl with ` +
      `--from-org N, which learns it from the list (the organizationId the list shows for a learner this ` +
      `tool moved into '${org}').`,
  );
}

function logOrgIdEvent(logger: Logger, e: OrgIdEvent): void {
  const text = describeOrgIdEvent(e);
  if (e.kind === 'learned' || e.kind === 'confirmed') logger.info({ org: e.org, orgId: e.id }, text);
  else logger.warn({ org: e.org, seen: e.seen }, text);
}
