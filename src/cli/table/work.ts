// `work` in the command table: its flags and help. The command itself is cli/work.ts,
// imported when it runs.
import { Option, type Command } from 'commander';
import type { Cli } from '../io.ts';
import { positiveInt } from '../parsers.ts';

export function register(program: Command, cli: Cli): void {
  program
    .command('work')
    .description(
      'Run transfer workers for every configured organization (or --org), sharing the budget through Redis',
    )
    .addOption(
      new Option('--concurrency <n>', 'transfers in flight per organization (default CONCURRENCY)').argParser(
        positiveInt('--concurrency', 1000),
      ),
    )
    .option('--org <key...>', 'serve only these organizations')
    .option(
      '--until-idle',
      'exit when nothing is waiting, delayed or active (exit 0 only if every learner this process finished succeeded; 8 when a canary run waits for approval; 9 when the error budget halted an organization with work left)',
    )
    .option(
      '--metrics-port <n>',
      'serve Prometheus /metrics, and the open probes /healthz and /readyz, on this port',
      positiveInt('--metrics-port', 65535),
    )
    .option(
      '--metrics-host <h>',
      'address of the /metrics server (not loopback: needs DASHBOARD_TOKEN as Bearer)',
      '127.0.0.1',
    )
    .option('--no-control', 'do not serve the control queue (scheduled reconciles)')
    .action(async (opts) => (await import('../work.ts')).workCommand(cli, opts));
}
