import { Command } from 'commander';
import { basename } from 'node:path';
import { requireOrg } from '../app/context.ts';
import { LearnerTransferError } from '../core/errors.ts';
import { formatPlan, planCsv } from '../ops/intake/plan.ts';
import { addCrawlOptions, runCrawlCommand, type CrawlFlags } from './crawl.ts';
import { runReconcileCommand } from './reconcile.ts';
import { EXIT, rejectPrinter, requireOrgSource } from './shared.ts';
import type { Cli } from './io.ts';
import { orgIdPairOption, wholeNumber } from './parsers.ts';
import { runCheckCommand } from './preflight.ts';

/** enqueue --dry-run and plan --csv: the CSV read as enqueue reads it, then planned. */
export async function runCsvPlan(
  cli: Cli,
  opts: { csv: string; org?: string | undefined; tokens?: number | undefined },
): Promise<void> {
  const config = cli.config({ requireTokens: true });
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

export function register(program: Command, cli: Cli): void {
  addCrawlOptions(
    program
      .command('plan')
      .description(
        'Say what would be transferred, how many per organization and how long it takes at the limits and the budget left now (no queue writes, no transfers)',
      )
      .option('--csv <file>', 'plan an enqueue of this CSV')
      .option('--crawl', 'plan a crawl of --org with the crawl filters')
      .option('--desired <file>', 'plan a reconcile against this desired-state CSV'),
    'numeric id of --org as the list shows it (organizationId): plan --check remembers it in Redis for later ' +
      'runs (as crawl and reconcile do); plan --crawl uses it for this plan only (with --from-org it may be left out)',
  )
    .option(
      '--org-id <key=n>',
      'with --desired: numeric id of an organization key (repeatable)',
      orgIdPairOption,
    )
    .option(
      '--tokens <n>',
      'also say when the work would finish with N usable tokens per organization',
      wholeNumber('--tokens', 1, 1000),
    )
    .option('--quiet', 'no progress output')
    .option(
      '--check',
      'with --org and --csv FILE or --run ID: check the cohort against the learner list first, and print the command that applies it (docs/preflight.md)',
    )
    .option(
      '--apply',
      'with --check: enqueue the cohort, recording in-target learners done and holding unknown and userless ones (no call)',
    )
    .option('--run <id>', 'with --check: the learners of this run still waiting for their transfer')
    .option('--out <file>', 'with --check: where the classes go (default: <csv>.check.csv beside it)')
    .action(async (opts: PlanFlags) => {
      if (opts.apply && !opts.check)
        throw new LearnerTransferError('LT_USAGE', '--apply goes with plan --check');
      if (opts.check) {
        if (opts.crawl || opts.desired) {
          throw new LearnerTransferError(
            'LT_USAGE',
            'plan --check reads a --csv FILE, not --crawl or --desired',
          );
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
    });
}
