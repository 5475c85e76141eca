// `schedule` (reconcile, list, remove) in the command table: its flags and help.
// The command itself is cli/schedule.ts, imported when it runs.
import { Option, type Command } from 'commander';
import type { Cli } from '../io.ts';
import { orgIdPairOption } from '../parsers.ts';

function addWhenOptions(cmd: Command): Command {
  return cmd
    .option('--cron <pattern>', 'cron pattern, like "0 2 * * *" (02:00 every night)')
    .option('--every <duration>', 'fixed interval instead of cron, like 1h or 30s')
    .option(
      '--tz <zone>',
      'IANA time zone of the cron pattern (default: the local zone of the worker processes)',
    )
    .option('--id <id>', 'schedule id (default reconcile-<file name>); the same id replaces a schedule');
}

export function register(program: Command, cli: Cli): void {
  const schedule = addWhenOptions(
    program
      .command('schedule')
      .description(
        'Schedule work that the running `work` fleet performs (BullMQ job schedulers): list, remove, reconcile',
      ),
  );

  addWhenOptions(
    schedule
      .command('reconcile')
      .description(
        'Run a reconcile on a schedule; the desired file must be readable at the same path by the workers',
      )
      .requiredOption('--desired <file>', 'desired-state CSV (learner id, org)')
      .option('--org <key>', 'organization for rows without an org column')
      .addOption(
        new Option('--org-id <key=n>', 'numeric id of an organization key (repeatable)').argParser(
          orgIdPairOption,
        ),
      ),
  ).action(async (opts, cmd) => (await import('../schedule.ts')).scheduleReconcile(cli, opts, cmd));

  schedule
    .command('list')
    .description('List schedules with their next run')
    .action(async () => (await import('../schedule.ts')).listSchedules(cli));

  schedule
    .command('remove')
    .description('Remove a schedule (a run in progress finishes)')
    .argument('<id>', 'schedule id, as `schedule list` shows it')
    .action(async (id) => (await import('../schedule.ts')).removeCommand(cli, id));
}
