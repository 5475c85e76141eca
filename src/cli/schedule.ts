import { Command, Option } from 'commander';
import { requireOrg } from '../app/context.ts';
import { parseDuration } from '../core/duration.ts';
import { LearnerTransferError } from '../core/errors.ts';
import { formatSchedules } from '../queue/control.ts';
import {
  removeSchedule,
  resolveDesiredFile,
  saveReconcileSchedule,
  scheduleList,
} from '../ops/intake/schedule.ts';
import { EXIT } from './shared.ts';
import type { Cli } from './io.ts';
import { orgIdPairOption } from './parsers.ts';

interface WhenFlags {
  cron?: string;
  every?: string;
  tz?: string;
  id?: string;
}

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

type ReconcileFlags = WhenFlags & { desired: string; org?: string; orgId?: Record<string, number> };

/** --cron or --every, exactly one; --every read as a duration. */
function whenOf(when: WhenFlags): { cron?: string; every?: number } {
  if (Boolean(when.cron) === Boolean(when.every)) {
    throw new LearnerTransferError(
      'LT_USAGE',
      'schedule needs exactly one of --cron "PATTERN" or --every DURATION',
    );
  }
  const every = when.every === undefined ? undefined : parseDuration(when.every);
  if (when.every !== undefined && every === undefined) {
    throw new LearnerTransferError(
      'LT_USAGE',
      `--every expects a duration like 1h or 30s, got '${when.every}'`,
    );
  }
  return { ...(when.cron ? { cron: when.cron } : {}), ...(every !== undefined ? { every } : {}) };
}

async function scheduleReconcile(cli: Cli, opts: ReconcileFlags, cmd: Command): Promise<void> {
  const when = { ...(cmd.parent?.opts() as WhenFlags), ...opts };
  const { cron, every } = whenOf(when);
  const config = cli.config({ requireTokens: true });
  if (opts.org) requireOrg(config, opts.org);
  const desired = await resolveDesiredFile(config.scheduleDir, opts.desired);
  const ctx = await cli.context(config);
  try {
    const { id, saved } = await saveReconcileSchedule(ctx, {
      desired,
      defaultOrg: opts.org,
      orgIds: opts.orgId,
      cron,
      every,
      tz: when.tz,
      id: when.id,
    });
    cli.print(`schedule ${id} saved: the \`work\` processes run it`);
    if (saved) cli.print(formatSchedules([saved]));
    cli.exitCode = EXIT.ok;
  } finally {
    await ctx.close();
  }
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
  ).action((opts: ReconcileFlags, cmd: Command) => scheduleReconcile(cli, opts, cmd));

  schedule
    .command('list')
    .description('List schedules with their next run')
    .action(async () => {
      const ctx = await cli.context(cli.config());
      try {
        cli.print(formatSchedules(await scheduleList(ctx)));
      } finally {
        await ctx.close();
      }
    });

  schedule
    .command('remove')
    .description('Remove a schedule (a run in progress finishes)')
    .argument('<id>', 'schedule id, as `schedule list` shows it')
    .action(async (id: string) => {
      const ctx = await cli.context(cli.config());
      try {
        await removeSchedule(ctx, id);
        cli.print(`schedule ${id} removed`);
      } finally {
        await ctx.close();
      }
    });
}
