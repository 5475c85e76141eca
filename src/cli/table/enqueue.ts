// `enqueue` in the command table: its flags and help. The command itself is cli/enqueue.ts,
// imported when it runs.
import { Option, type Command } from 'commander';
import type { Cli } from '../io.ts';
import { addCanaryOptions } from '../canary-flags.ts';
import { positiveInt, priorityOption, runIdOption } from '../parsers.ts';

export function register(program: Command, cli: Cli): void {
  addCanaryOptions(program.command('enqueue'))
    .description('Enqueue learner ids from a CSV file (header learnerId/learner_id/id, optional org column)')
    .requiredOption('--csv <file>', 'CSV file of learner ids')
    .option('--org <key>', 'organization for rows without an org column (a key from LEARNER_API_TOKENS)')
    .option('--rejects <file>', 'where to write rejected rows (default out/<run>/rejects.csv)')
    .addOption(
      new Option('--run <id>', "run id: letters, digits, '-' and '_' (default: a new one)").argParser(
        runIdOption('--run'),
      ),
    )
    .addOption(
      new Option('--batch <n>', 'jobs per addBulk').argParser(positiveInt('--batch', 10_000)).default(1000),
    )
    .addOption(
      new Option(
        '--priority <level>',
        "urgent: put these learners ahead of their organization's bulk (same budget; learners already waiting move ahead); normal: in turn",
      )
        .argParser(priorityOption)
        .default('normal'),
    )
    .option('--quiet', 'no progress output')
    .option('--dry-run', 'only plan: counts per organization and ETA, no queue writes')
    .option(
      '--move',
      "move learners claimed by another organization to this row's organization (written in the audit); only learners done or failed there move",
    )
    .action(async (opts) => (await import('../enqueue.ts')).enqueueCommand(cli, opts));
}
