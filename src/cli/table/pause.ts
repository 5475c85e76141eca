// `pause` and `resume` in the command table: its flags and help.
// The command itself is cli/pause.ts, imported when it runs.
import { Option, type Command } from 'commander';
import type { Cli } from '../io.ts';
import { tokenIdOption } from '../parsers.ts';

function command(program: Command, cli: Cli, paused: boolean): void {
  const name = paused ? 'pause' : 'resume';
  program
    .command(name)
    .description(
      paused
        ? 'Send no new transfer for an organization (or one token of it) from any worker, until resume; calls in flight finish'
        : 'Resume the transfers of an organization (or one token of it) paused with pause',
    )
    .requiredOption('--org <key>', 'organization')
    .addOption(
      new Option('--token <id>', 'only this token (as tokens list shows it)').argParser(tokenIdOption),
    )
    .action(async (opts) => (await import('../pause.ts')).pauseCommand(cli, opts, paused));
}

export function register(program: Command, cli: Cli): void {
  command(program, cli, true);
}

export function registerResume(program: Command, cli: Cli): void {
  command(program, cli, false);
}
