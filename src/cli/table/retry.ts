// `retry` in the command table: its flags and help. The command itself is cli/retry.ts,
// imported when it runs.
import { Option, type Command } from 'commander';
import type { Cli } from '../io.ts';
import { autoApproveOption, canaryOption } from '../canary-flags.ts';
import { BUCKET_CHOICES, learnerIdOption } from '../parsers.ts';

export function register(program: Command, cli: Cli): void {
  program
    .command('retry')
    .description('Re-queue failed learners with fresh attempts (all failures, or by outcome, learner or run)')
    .addOption(
      new Option('--status <code>', 'only this outcome code').choices(
        BUCKET_CHOICES.filter(
          (b) => b !== 'queued' && b !== 'retrying' && b !== 'transferred' && b !== 'already-in-org',
        ),
      ),
    )
    .addOption(
      new Option('--learner <id...>', 'only these learner ids').argParser(
        (v: string, prev: number[] = []) => [...prev, learnerIdOption('--learner')(v)],
      ),
    )
    .option('--run <id>', 'only learners of this run')
    .option('--org <key...>', 'only these organizations')
    .option(
      '--move',
      'move learners now claimed by another organization back here (written in the audit); only learners done or failed there move',
    )
    .option(
      '--yes',
      'retry not-found, forbidden, invalid-request, unexpected-result and held learners without asking (a script needs it for those)',
    )
    .addOption(canaryOption())
    .addOption(autoApproveOption())
    .action(async (opts) => (await import('../retry.ts')).runRetry(cli, opts));
}
