import { Command, Option } from 'commander';
import { access, constants } from 'node:fs/promises';
import { basename, extname, resolve } from 'node:path';
import { requireOrg } from '../app/context.ts';
import { parseDuration } from '../core/duration.ts';
import { LearnerTransferError } from '../core/errors.ts';
import {
  formatSchedules,
  listSchedules,
  openControlQueue,
  resolveScheduleFile,
  upsertSchedule,
} from '../queue/control.ts';
import { OrgIds, unknownOrgId } from '../queue/org-ids.ts';
import { readCsv } from '../queue/sources/csv.ts';
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
  ).action(
    async (
      opts: WhenFlags & { desired: string; org?: string; orgId?: Record<string, number> },
      cmd: Command,
    ) => {
      const when = { ...(cmd.parent?.opts() as WhenFlags), ...opts };
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
      const config = cli.config({ requireTokens: true });
      if (opts.org) requireOrg(config, opts.org);
      // Only a file inside SCHEDULE_DIR (symlinks resolved): the workers refuse any other.
      const desired = await resolveScheduleFile(config.scheduleDir, resolve(opts.desired));
      try {
        await access(desired, constants.R_OK);
      } catch (err) {
        throw new LearnerTransferError(
          'LT_INPUT_UNREADABLE',
          `${desired}: cannot be read (${(err as Error).message})`,
          {
            cause: err,
          },
        );
      }
      const ctx = await cli.context(config);
      const queue = openControlQueue(ctx.redis, ctx.keys);
      try {
        // Check now what would fail at 02:00: every organization of the file needs its numeric id.
        const orgs = new Set<string>();
        for await (const ev of readCsv({ file: desired, defaultOrg: opts.org, knownOrgs: config.orgs })) {
          if (ev.kind === 'row') orgs.add(ev.org);
        }
        const ids = new OrgIds(ctx.redis, ctx.keys);
        await ids.set(opts.orgId ?? {});
        const known = await ids.all();
        const missing = [...orgs].filter((o) => known[o] === undefined);
        if (missing.length > 0)
          throw unknownOrgId(missing.join(', '), missing.map((o) => `--org-id ${o}=N`).join(' '));
        const id = when.id ?? `reconcile-${basename(desired, extname(desired))}`;
        try {
          await upsertSchedule(queue, {
            id,
            cron: when.cron,
            every,
            tz: when.tz,
            data: {
              kind: 'reconcile',
              scheduleId: id,
              desired,
              ...(opts.org ? { defaultOrg: opts.org } : {}),
              orgIds: Object.fromEntries([...orgs].map((o) => [o, known[o] as number])),
            },
          });
        } catch (err) {
          throw new LearnerTransferError('LT_USAGE', `schedule '${id}': ${(err as Error).message}`, {
            cause: err,
          });
        }
        const [saved] = (await listSchedules(queue)).filter((s) => s.key === id);
        cli.print(`schedule ${id} saved: the \`work\` processes run it`);
        if (saved) cli.print(formatSchedules([saved]));
        cli.exitCode = EXIT.ok;
      } finally {
        await queue.close();
        await ctx.close();
      }
    },
  );

  schedule
    .command('list')
    .description('List schedules with their next run')
    .action(async () => {
      const ctx = await cli.context(cli.config());
      const queue = openControlQueue(ctx.redis, ctx.keys);
      try {
        cli.print(formatSchedules(await listSchedules(queue)));
      } finally {
        await queue.close();
        await ctx.close();
      }
    });

  schedule
    .command('remove')
    .description('Remove a schedule (a run in progress finishes)')
    .argument('<id>', 'schedule id, as `schedule list` shows it')
    .action(async (id: string) => {
      const ctx = await cli.context(cli.config());
      const queue = openControlQueue(ctx.redis, ctx.keys);
      try {
        if (!(await queue.removeJobScheduler(id))) {
          throw new LearnerTransferError(
            'LT_USAGE',
            `no schedule '${id}' (see: learner-transfer schedule list)`,
          );
        }
        cli.print(`schedule ${id} removed`);
      } finally {
        await queue.close();
        await ctx.close();
      }
    });
}
