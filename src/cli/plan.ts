import { basename } from 'node:path';
import { requireOrg } from '../app/context.ts';
import { LearnerTransferError } from '../core/errors.ts';
import { formatPlan, planCsv } from '../ops/intake/plan.ts';
import { runCrawlCommand, type CrawlFlags } from './crawl.ts';
import { runReconcileCommand } from './reconcile.ts';
import { EXIT, rejectPrinter, requireOrgSource } from './shared.ts';
import type { Cli } from './io.ts';
import { runCheckCommand } from './preflight.ts';

/** enqueue --dry-run and plan --csv: the CSV read as enqueue reads it, then planned. */
export async function runCsvPlan(
  cli: Cli,
  opts: { csv: string; org?: string | undefined; tokens?: number | undefined },
): Promise<void> {
  const config = await cli.config({ requireTokens: true });
  if (opts.org) requireOrg(config, opts.org);
  await requireOrgSource(opts.csv, opts.org, config.orgs);
  const ctx = await cli.context(config);
  try {
    // The rows a real run would reject, by line and reason, as it prints them.
    const p = await planCsv(ctx, {
      file: opts.csv,
      defaultOrg: opts.org,
      knownOrgs: config.orgs,
      tokens: opts.tokens,
      onReject: rejectPrinter(cli, opts.csv, '(more rejects: a real run writes each to its rejects file)'),
    });
    cli.print(
      formatPlan(
        p.plans,
        `${basename(opts.csv)}: ${p.valid} learners (${p.rejected} rows rejected or repeated)`,
      ),
    );
    if (p.valid === 0) {
      throw new LearnerTransferError('LT_INPUT_INVALID', `${opts.csv}: no valid learner id was read`);
    }
    cli.exitCode = EXIT.ok;
  } finally {
    await ctx.close();
  }
}

type PlanFlags = CrawlFlags & {
  csv?: string;
  desired?: string;
  crawl?: boolean;
  orgId?: Record<string, number>;
  tokens?: number;
  check?: boolean;
  run?: string;
  apply?: boolean;
  out?: string;
};

export async function planCommand(cli: Cli, opts: PlanFlags): Promise<void> {
  if (opts.apply && !opts.check) throw new LearnerTransferError('LT_USAGE', '--apply goes with plan --check');
  if (opts.check) {
    if (opts.crawl || opts.desired) {
      throw new LearnerTransferError('LT_USAGE', 'plan --check reads a --csv FILE, not --crawl or --desired');
    }
    return runCheckCommand(cli, opts);
  }
  const sources = [opts.csv, opts.crawl, opts.desired].filter(Boolean).length;
  if (sources !== 1) {
    throw new LearnerTransferError(
      'LT_USAGE',
      'plan needs exactly one of --csv FILE, --crawl or --desired FILE',
    );
  }
  if (opts.csv) return runCsvPlan(cli, { csv: opts.csv, org: opts.org, tokens: opts.tokens });
  if (opts.desired) {
    return runReconcileCommand(cli, {
      desired: opts.desired,
      org: opts.org,
      orgId: opts.orgId,
      concurrency: opts.concurrency,
      dryRun: true,
      quiet: opts.quiet,
      tokens: opts.tokens,
    });
  }
  return runCrawlCommand(cli, { ...opts, dryRun: true });
}
