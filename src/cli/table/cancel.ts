// `cancel` in the command table: its flags and help. The command itself is cli/cancel.ts,
// imported when it runs.
import { Option, type Command } from 'commander';
import type { Cli } from '../io.ts';
import { learnerIdOption } from '../parsers.ts';

export function register(program: Command, cli: Cli): void {
  program
    .command('cancel')
    .description(
      'Withdraw learners not called yet (by run, CSV or id): out of the queues, recorded cancelled; a call in flight finishes (docs/cancel.md)',
    )
    .option('--run <id>', 'every learner of this run not called yet')
    .option('--csv <file>', 'the learners of this CSV file (read as enqueue --csv reads it)')
    .addOption(
      new Option('--learner <id...>', 'these learner ids (space- or comma-separated, or repeated)').argParser(
        (v: string, prev: number[] = []) => [
          ...prev,
          ...v
            .split(',')
            .filter((x) => x.trim() !== '')
            .map((x) => learnerIdOption('--learner')(x.trim())),
        ],
      ),
    )
    .option(
      '--org <key>',
      'only this organization (default: every organization: a run or a learner is found wherever it is; with --csv, the organization of rows without an org column)',
    )
    .option('--dry-run', 'say what would be cancelled, change nothing')
    .option('--json', 'machine-readable output')
    .action(async (opts) => (await import('../cancel.ts')).cancelCommand(cli, opts));
}
