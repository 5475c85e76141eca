// `reconcile` in the command table: its flags and help. The command itself is cli/reconcile.ts,
// imported when it runs.
import { Option, type Command } from 'commander';
import type { Cli } from '../io.ts';
import { autoApproveOption, canaryOption } from '../canary-flags.ts';
import { orgIdPairOption, positiveInt, runIdOption } from '../parsers.ts';

/** The reconcile flags, shared with `plan --desired` and `schedule reconcile`. */
export function addReconcileOptions(cmd: Command): Command {
  return cmd
    .option('--org <key>', 'organization for rows without an org column')
    .option(
      '--org-id <key=n>',
      'numeric id of an organization key as the list shows it (repeatable; remembered in Redis)',
      orgIdPairOption,
    )
    .addOption(
      new Option('--concurrency <n>', 'pages read at once')
        .argParser(positiveInt('--concurrency', 64))
        .default(4),
    );
}

export function register(program: Command, cli: Cli): void {
  addReconcileOptions(
    program
      .command('reconcile')
      .description(
        'Compare a desired-state CSV (learner id, org) with the learner list and enqueue the drift (re-opens finished learners)',
      )
      .requiredOption('--desired <file>', 'CSV of learner ids and organization keys (header learnerId,org)'),
  )
    .option('--out <dir>', 'where to write the drift report (default out/<run>)')
    .addOption(
      new Option('--run <id>', "run id: letters, digits, '-' and '_' (default: a new one)").argParser(
        runIdOption('--run'),
      ),
    )
    .option('--dry-run', 'only plan: drift, counts and ETA; no queue writes, no report, no transfers')
    .option('--quiet', 'no progress output')
    .addOption(canaryOption())
    .addOption(autoApproveOption())
    .action(async (opts) => (await import('../reconcile.ts')).runReconcileCommand(cli, opts));
}
