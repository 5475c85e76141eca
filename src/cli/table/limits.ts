// `limits show|set|reset` and `changes` in the command table: its flags and help.
// The command itself is cli/limits.ts, imported when it runs.
import { Option, type Command } from 'commander';
import type { Cli } from '../io.ts';
import {
  blackoutOption,
  burstOption,
  haltAtOption,
  haltSampleOption,
  positiveInt,
  rateOption,
  timeZoneOption,
  tokenIdOption,
  runWindowOption,
} from '../parsers.ts';
import { addLateOption } from './late.ts';

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

/** The pacing and run-window flags of `limits set`. */
function budgetOptions(command: Command): Command {
  return command
    .addOption(
      new Option(
        '--burst <N|P%|off>',
        'pacing: how many permits a token (and the organization) may send at once before one per window/limit; a number, a share of each limit, or off (the windows alone)',
      ).argParser(burstOption),
    )
    .addOption(
      new Option(
        '--run-window <windows>',
        'when transfers may run, like "Mon-Fri 18:00-07:00, Sat-Sun all" (days, then HH:MM-HH:MM or all)',
      ).argParser(runWindowOption),
    )
    .addOption(
      new Option(
        '--tz <zone>',
        'the time zone of --run-window and --blackout, like Europe/Berlin (default UTC)',
      ).argParser(timeZoneOption),
    )
    .addOption(
      new Option(
        '--blackout <dates>',
        'days with no transfer at all, like 2026-12-21..2027-01-06 (a comma-separated list; "none" removes them)',
      ).argParser(blackoutOption),
    )
    .addOption(
      new Option(
        '--halt-at <P%|off>',
        'the error budget: halt the organization when this share of its last outcomes failed (like 50%), or off',
      ).argParser(haltAtOption),
    )
    .addOption(
      new Option(
        '--halt-sample <N>',
        'the error budget: how many of the last final outcomes it judges (default HALT_SAMPLE, 20)',
      ).argParser(haltSampleOption),
    );
}

function registerSet(limits: Command, cli: Cli): void {
  const set = limits
    .command('set')
    .description(
      'Change the limits of an organization (or of one token) for every worker on every host, within seconds, with no restart',
    )
    .requiredOption('--org <key>', 'organization')
    .addOption(
      new Option('--per-org <N/DUR>', "the organization's limit, like 1000/1d").argParser(
        rateOption('--per-org'),
      ),
    )
    .addOption(
      new Option(
        '--per-token <N/DUR>',
        'the limit of each token (with --token: of that token only), like 100/1h',
      ).argParser(rateOption('--per-token')),
    )
    .addOption(
      new Option('--token <id>', 'with --per-token: the token id (as tokens list shows it)').argParser(
        tokenIdOption,
      ),
    );
  addLateOption(
    set,
    new Option(
      '--reserve <N|P%>',
      "permits of each organization window kept for the organization's other clients (a number, or a share of --per-org)",
    ),
    'reserve',
  );
  budgetOptions(set).action(async (opts) => (await import('../limits.ts')).setCommand(cli, opts));
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
