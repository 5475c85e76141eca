import type { Command } from 'commander';
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

interface WhenFlags {
  cron?: string;
  every?: string;
  tz?: string;
  id?: string;
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

export async function scheduleReconcile(cli: Cli, opts: ReconcileFlags, cmd: Command): Promise<void> {
  const when = { ...(cmd.parent?.opts() as WhenFlags), ...opts };
  const { cron, every } = whenOf(when);
  const config = await cli.config({ requireTokens: true });
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

export async function listSchedules(cli: Cli): Promise<void> {
  const ctx = await cli.context(await cli.config());
  try {
    cli.print(formatSchedules(await scheduleList(ctx)));
  } finally {
    await ctx.close();
  }
}

export async function removeCommand(cli: Cli, id: string): Promise<void> {
  const ctx = await cli.context(await cli.config());
  try {
    await removeSchedule(ctx, id);
    cli.print(`schedule ${id} removed`);
  } finally {
    await ctx.close();
  }
}
