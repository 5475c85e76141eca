import { canaryOf, formatCanaryLine } from './canary-flags.ts';
import { requireOrg } from '../app/context.ts';
import type { Config } from '../core/config.ts';
import { LearnerTransferError } from '../core/errors.ts';
import { Progress } from './progress-line.ts';
import { runCrawl } from '../ops/intake/crawl.ts';
import { formatPlan } from '../ops/intake/plan.ts';
import { formatClaimedElsewhere, claimedElsewhereTotal } from '../queue/producer.ts';
import { describeFilters, type CrawlFilters, type CrawlSummary } from '../queue/sources/crawl.ts';
import { EXIT, runAbortable } from './shared.ts';
import type { Cli } from './io.ts';

export interface CrawlFlags {
  org: string;
  targetOrgId?: number;
  fromOrg?: number;
  activeOnly?: boolean;
  withUserOnly?: boolean;
  limit?: number;
  crawlId?: string;
  restart?: boolean;
  concurrency: number;
  dryRun?: boolean;
  quiet?: boolean;
  /** plan --crawl --tokens N */
  tokens?: number;
  canary?: number;
  autoApprove?: boolean;
}

export function filtersOf(opts: CrawlFlags): CrawlFilters {
  return {
    fromOrgId: opts.fromOrg,
    activeOnly: Boolean(opts.activeOnly),
    withUserOnly: Boolean(opts.withUserOnly),
    limit: opts.limit,
  };
}

export function crawlOrgOf(config: Readonly<Config>, opts: { org?: string }): string {
  if (!opts.org)
    throw new LearnerTransferError(
      'LT_USAGE',
      '--org <key> is required: the organization to move learners into',
    );
  return requireOrg(config, opts.org);
}

export function formatCrawlSummary(s: CrawlSummary, org: string): string {
  const done = Object.entries(s.alreadyDone)
    .map(([b, n]) => `${n} ${b}`)
    .join(', ');
  const sk = s.skipped;
  return [
    `run ${s.runId}: crawl ${org} (crawl id ${s.crawlId}${s.resumedAt ? `, resumed at page ${s.resumedAt}` : ''})`,
    `  pages      ${s.lastPage} (${s.requests} reads, ${s.rereads} re-reads of pages the list changed under)`,
    `  seen       ${s.seen} learners`,
    `  selected   ${s.selected}${s.stoppedByLimit ? ' (limit reached)' : ''}; skipped ${sk['in-target']} in target, ` +
      `${sk['other-org']} other org, ${sk.inactive} inactive, ${sk['no-user']} without user`,
    `  enqueued   ${s.enqueued}, already queued ${s.alreadyQueued}, already done ${done || 0}`,
    `  claimed elsewhere ${claimedElsewhereTotal(s)}${claimedElsewhereTotal(s) ? ` (claimed by ${formatClaimedElsewhere(s)}: left there; moving them takes enqueue --move)` : ''}`,
    ...(s.unsettledPages.length
      ? [
          `  warning    the list kept changing on pages ${s.unsettledPages.join(', ')}: run a reconcile or crawl again`,
        ]
      : []),
  ].join('\n');
}

export async function runCrawlCommand(cli: Cli, opts: CrawlFlags): Promise<void> {
  const config = await cli.config({ requireBaseUrl: true, requireTokens: true });
  const org = crawlOrgOf(config, opts);
  const dryRun = Boolean(opts.dryRun);
  const canary = canaryOf(opts);
  const ctx = await cli.context(config);
  await runAbortable(
    cli,
    ctx,
    'crawl interrupted: the cursor keeps the pages done; run the same command to resume',
    async (signal) => {
      const filters = filtersOf(opts);
      const progress = new Progress({
        label: `crawl ${org}`,
        unit: 'pages',
        stream: cli.stderr,
        enabled: !opts.quiet,
      });
      const { summary, plans, notes } = await runCrawl(ctx, {
        org,
        targetOrgId: opts.targetOrgId,
        filters,
        crawlId: opts.crawlId,
        restart: opts.restart,
        dryRun,
        canary,
        whatIfTokens: opts.tokens,
        concurrency: opts.concurrency,
        signal,
        onProgress: (p) =>
          progress.update(
            p.pagesDone,
            `page ${p.pagesDone}/${p.lastPage}, ${p.seen} seen, ${p.selected} selected`,
          ),
        onRetry: (page, code, waitMs) =>
          ctx.logger.warn({ page, code, waitMs }, 'list page failed, retrying'),
      });
      progress.end(`${summary.lastPage} pages, ${summary.seen} seen, ${summary.selected} selected`);
      for (const note of notes) cli.print(note);
      cli.print(
        plans
          ? formatPlan(plans, `crawl ${org} (${describeFilters(filters)})`)
          : formatCrawlSummary(summary, org),
      );
      if (canary && !plans) cli.print(formatCanaryLine(summary.runId, canary, summary.awaitingApproval));
      cli.exitCode = EXIT.ok;
    },
  );
}
