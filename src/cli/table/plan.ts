// `plan` in the command table: its flags and help. The command itself is cli/plan.ts,
// imported when it runs.
import type { Command } from 'commander';
import type { Cli } from '../io.ts';
import { addCrawlOptions } from './crawl.ts';
import { orgIdPairOption, wholeNumber } from '../parsers.ts';

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
    .action(async (opts) => (await import('../plan.ts')).planCommand(cli, opts));
}
