// `limits show|set|reset` and `changes` in the command table: its flags and help.
// The command itself is cli/limits.ts, imported when it runs.
import { Option, type Command } from 'commander';
import type { Cli } from '../io.ts';
import { LIMIT_FLAGS } from '../../limiter/kinds.ts';
import { limitFlagOption, positiveInt, tokenIdOption } from '../parsers.ts';

export function register(program: Command, cli: Cli): void {
  const limits = program
    .command('limits')
    .description(
      "The fleet's limits per organization and per token, stored in Redis: show them, change them live, reset them to LIMIT_*",
    );
  registerShow(limits, cli);
  registerSet(limits, cli);
  registerReset(limits, cli);
}

function registerShow(limits: Command, cli: Cli): void {
  limits
    .command('show')
    .description(
      'Limits per organization and token as every worker applies them, the reserve, pauses, and how they differ from LIMIT_*',
    )
    .option('--org <key>', 'one organization (default: every organization with a token)')
    .option('--json', 'machine-readable output')
    .action(async (opts) => (await import('../limits.ts')).showLimits(cli, opts));
}

function registerSet(limits: Command, cli: Cli): void {
  const set = limits
    .command('set')
    .description(
      'Change the limits of an organization (or of one token) for every worker on every host, within seconds, with no restart',
    )
    .requiredOption('--org <key>', 'organization');
  // Every kind of limit's flags (limiter/kinds.ts), --token after --per-token.
  for (const f of LIMIT_FLAGS) {
    set.addOption(new Option(f.flag, f.help).argParser(limitFlagOption(f)));
    if (f.option === 'perToken')
      set.addOption(
        new Option('--token <id>', 'with --per-token: the token id (as tokens list shows it)').argParser(
          tokenIdOption,
        ),
      );
  }
  set.action(async (opts) => (await import('../limits.ts')).setCommand(cli, opts));
}

function registerReset(limits: Command, cli: Cli): void {
  limits
    .command('reset')
    .description(
      "Set an organization's limits back to LIMIT_PER_TOKEN / LIMIT_PER_ORG / LIMIT_BURST of this environment (no token limits of their own, no reserve); its run window stays unless --run-window is given",
    )
    .requiredOption('--org <key>', 'organization')
    .option('--run-window', 'remove the run window and its blackouts instead (transfers may run at any hour)')
    .action(async (opts) => (await import('../limits.ts')).resetCommand(cli, opts));
}

export function registerChanges(program: Command, cli: Cli): void {
  program
    .command('changes')
    .description(
      'The log of changes made through the live controls (limits, pause, resume) and of token file reloads: who, what, when',
    )
    .option('--org <key>', 'only the changes of this organization')
    .option('--limit <n>', 'how many, newest first (default 50)', positiveInt('--limit', 100_000))
    .option('--json', 'machine-readable output')
    .action(async (opts) => (await import('../limits.ts')).changesCommand(cli, opts));
}
