// `approve` in the command table: its flags and help. The command itself is cli/approve.ts,
// imported when it runs.
import type { Command } from 'commander';
import type { Cli } from '../io.ts';

export function register(program: Command, cli: Cli): void {
  program
    .command('approve')
    .description(
      'Release the learners of a canary run (--canary N) that wait for approval after its canary (docs/canary.md)',
    )
    .requiredOption('--run <id>', 'the canary run to approve')
    .option('--org <key>', 'only in this organization (default: every organization of the run)')
    .option('--dry-run', 'say how many would be released, change nothing')
    .option('--json', 'machine-readable output')
    .action(async (opts) => (await import('../approve.ts')).approveCommand(cli, opts));
}
