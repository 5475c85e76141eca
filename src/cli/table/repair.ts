// `repair` in the command table: its flags and help. The command itself is cli/repair.ts,
// imported when it runs.
import type { Command } from 'commander';
import type { Cli } from '../io.ts';

export function register(program: Command, cli: Cli): void {
  program
    .command('repair')
    .description(
      'Find learners waiting with no job (a crash between two writes) and jobs with no record, and repair them (work also runs this every REPAIR_INTERVAL)',
    )
    .option('--org <key...>', 'only these organizations')
    .option('--dry-run', 'only report what is found; exit 1 when anything is')
    .action(async (opts) => (await import('../repair.ts')).repairCommand(cli, opts));
}
