// `simulate` in the command table: its flags and help. The command itself is cli/simulate.ts,
// imported when it runs.
import { Option, type Command } from 'commander';
import type { Cli } from '../io.ts';
import { latencyRangeOption, serviceRateOption, shareOption, wholeNumber } from '../parsers.ts';

export function register(program: Command, cli: Cli): void {
  program
    .command('simulate')
    .description('Run the Learner API simulator (seeded learners, optional limits and faults) until Ctrl-C')
    .option('--port <n>', 'port to listen on (0 picks a free one)', wholeNumber('--port', 0, 65535), 4010)
    .option('--host <h>', 'address to listen on', '127.0.0.1')
    .option('--learners <n>', 'number of learners (default 1000)', wholeNumber('--learners', 0, 10_000_000))
    .option(
      '--seed <n>',
      'seed of the data and fault choices (default 1)',
      wholeNumber('--seed', 0, 2 ** 32 - 1),
    )
    .addOption(
      new Option('--repeat-mode <mode>', 'answer to a repeated transfer into the same organization').choices([
        'success',
        'error',
        'mixed',
      ]),
    )
    .option(
      '--limit-per-token <N/DURATION>',
      'enforce a transfer limit per token, like 100/1h',
      serviceRateOption('--limit-per-token'),
    )
    .option(
      '--limit-per-org <N/DURATION>',
      'enforce a transfer limit per organization, like 1000/1d',
      serviceRateOption('--limit-per-org'),
    )
    .addOption(
      new Option('--window <kind>', 'window of the limits').choices(['rolling', 'fixed']).default('rolling'),
    )
    .option(
      '--latency <min-max>',
      'service latency in ms, half before counting and half after, like 20-200',
      latencyRangeOption,
    )
    .option('--error-rate <share>', 'share of transfers answering 500', shareOption('--error-rate'))
    .option(
      '--reset-rate <share>',
      'share of transfers whose connection is reset',
      shareOption('--reset-rate'),
    )
    .option(
      '--truncate-rate <share>',
      'share of successful transfers with a cut body',
      shareOption('--truncate-rate'),
    )
    .action(async (flags) => (await import('../simulate.ts')).simulateCommand(cli, flags));
}
