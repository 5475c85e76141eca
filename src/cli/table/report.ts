// `report` in the command table: its flags and help. The command itself is cli/report.ts,
// imported when it runs.
import { Option, type Command } from 'commander';
import type { Cli } from '../io.ts';
import { BUCKET_CHOICES, orgIdPairOption } from '../parsers.ts';

export function register(program: Command, cli: Cli): void {
  program
    .command('report')
    .description('One row per learner with its outcome code and details, or split result files')
    .option('--run <id>', 'only this run')
    .addOption(new Option('--status <code>', 'only this outcome code or state').choices([...BUCKET_CHOICES]))
    .addOption(new Option('--format <format>', 'output format').choices(['csv', 'ndjson']).default('csv'))
    .option('--out <file>', 'write here instead of stdout')
    .option('--split <dir>', 'write successes.csv, failures.csv, pending.csv and cancelled.csv into DIR')
    .option('--org <key...>', 'only these organizations')
    .option(
      '--reverse <dir>',
      'write into DIR what moving --run ID (or --org KEY) back would take: a CSV per previous organization ' +
        '(enqueue --csv FILE --move), regrant.csv, unknown.csv and check-by-hand.csv (docs/undo.md)',
    )
    .option(
      '--org-id <key=n>',
      'with --reverse: numeric id of an organization key, to name a previous organization by its key (repeatable)',
      orgIdPairOption,
    )
    .option('--archive <dir>', 'with --reverse: the audit archive to read too (default AUDIT_ARCHIVE_DIR)')
    .option('--redact', 'with --reverse: regrant.csv without e-mail addresses and names (docs/exports.md)')
    .action(async (opts) => (await import('../report.ts')).reportCommand(cli, opts));
}
