// `status` in the command table: its flags and help. The command itself is cli/status.ts,
// imported when it runs.
import type { Command } from 'commander';
import type { Cli } from '../io.ts';

export function register(program: Command, cli: Cli): void {
  program
    .command('status')
    .description(
      'Learners by state and outcome, budgets per token and organization, and the ETA of the remaining work',
    )
    .option('--json', 'machine-readable output: every organization (or those of --org), with its state')
    .option('--all', 'every organization in full, idle ones too (by default a big fleet summarizes them)')
    .option('--org <key...>', 'only these organizations, in full')
    .action(async (opts) => (await import('../status.ts')).statusCommand(cli, opts));
}
