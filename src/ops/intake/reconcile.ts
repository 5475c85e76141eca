// A reconcile with everything taken from the context: the CLI and the scheduled (control) job both
// run it, so a nightly reconcile is the same code as a manual one.
import type { AppContext } from '../../app/context.ts';
import { LearnerTransferError } from '../../core/errors.ts';
import { OrgIds } from '../../queue/org-ids.ts';
import { reconcile, type ReconcileOptions, type ReconcileSummary } from '../../queue/sources/reconcile.ts';
import { bindTokens } from '../../limiter/token-orgs.ts';
import { planOrgs, type OrgPlan } from './plan.ts';

export interface ReconcileRunOptions extends Omit<ReconcileOptions, 'knownOrgs' | 'orgIds' | 'tokens'> {
  /** Ids given now (--org-id); they are remembered, except in a dry run. */
  orgIds?: Readonly<Record<string, number>> | undefined;
}

export async function runReconcile(ctx: AppContext, options: ReconcileRunOptions): Promise<ReconcileSummary> {
  if (!ctx.client) {
    throw new LearnerTransferError('LT_USAGE', 'LEARNER_API_BASE_URL is required to read the learner list');
  }
  const ids = new OrgIds(ctx.redis, ctx.keys);
  const given = options.orgIds ?? {};
  // Refused when another key has one of the ids: one organization, one budget. A dry run writes nothing.
  await (options.dryRun ? ids.check(given) : ids.set(given));
  const orgIds = { ...(await ids.all()), ...given };
  // Ids remembered before they were checked may still share one: owners could not be told apart.
  await ids.check(orgIds);
  return reconcile(
    {
      producer: options.canary ? ctx.producer.withDefaults({ canary: options.canary.size }) : ctx.producer,
      runs: ctx.runs,
      store: ctx.store,
      client: ctx.client,
    },
    {
      ...options,
      // The tokens in force: in `work`, a reload of the token file may have added or rotated some.
      knownOrgs: ctx.tokens.orgs(),
      orgIds,
      maxPages: options.maxPages ?? ctx.config.crawlMaxPages,
      reportDir: options.reportDir ?? ctx.config.driftReportDir,
      // The list is the reseller's: any token may read it; a refused one hands over to the next.
      tokens: ctx.tokens.all().map((t) => t.secret),
    },
  );
}

/**
 * A reconcile as an operator runs it (the reconcile command, plan --desired): the tokens bound to their
 * organizations first (one token, one organization), then the drift enqueued, or in a dry run planned at
 * the limits and budget of now.
 */
export async function reconcileAndPlan(
  ctx: AppContext,
  options: ReconcileRunOptions,
  /** plan --desired --tokens N: the dry run's plan also says when N usable tokens would finish. */
  whatIfTokens?: number,
): Promise<{ summary: ReconcileSummary; plans: OrgPlan[] | undefined }> {
  const dryRun = Boolean(options.dryRun);
  await bindTokens(ctx.redis, ctx.keys.prefix, ctx.config.tokens, { dryRun, logger: ctx.logger });
  const summary = await runReconcile(ctx, options);
  const plans = dryRun
    ? await planOrgs(ctx, summary.driftIds ?? new Map(), { force: true, tokens: whatIfTokens })
    : undefined;
  return { summary, plans };
}
