import { existsSync } from 'node:fs';
import { requireOrg, type AppContext } from '../app/context.ts';
import { LearnerTransferError } from '../core/errors.ts';
import { formatSplit, writeReport, writeSplit } from '../ops/views/report.ts';
import { formatReverse, writeReverse } from '../ops/actions/reverse.ts';
import { requireReadableRunId } from './shared.ts';
import { compactedRunNote } from '../ops/actions/run-retention.ts';
import type { Cli } from './io.ts';

interface ReverseFlags {
  reverse?: string;
  run?: string;
  org?: string[];
  orgId?: Record<string, number>;
  archive?: string;
  redact?: boolean;
  status?: string;
  out?: string;
  split?: string;
}

/** --reverse takes a run or organizations, and none of the row filters or outputs of a report. */
function checkReverse(opts: ReverseFlags): void {
  const alone = [opts.status && '--status', opts.out && '--out', opts.split && '--split'].filter(Boolean);
  if (opts.reverse === undefined) {
    const needs = [opts.orgId && '--org-id', opts.archive && '--archive', opts.redact && '--redact'].filter(
      Boolean,
    );
    if (needs.length > 0)
      throw new LearnerTransferError('LT_USAGE', `${needs.join(', ')} go with --reverse DIR only`);
    return;
  }
  if (alone.length > 0)
    throw new LearnerTransferError('LT_USAGE', `--reverse cannot take ${alone.join(', ')}`);
  if (opts.run === undefined && opts.org === undefined)
    throw new LearnerTransferError(
      'LT_USAGE',
      '--reverse DIR needs --run ID or --org KEY (what to move back)',
    );
  if (opts.archive !== undefined && !existsSync(opts.archive))
    throw new LearnerTransferError(
      'LT_USAGE',
      `--archive ${opts.archive}: no such directory (the audit archive to read)`,
    );
}

/** report --reverse DIR: the run's (or --org's) organizations, with a token or not. */
async function runReverse(
  cli: Cli,
  ctx: AppContext,
  opts: ReverseFlags & { reverse: string },
): Promise<void> {
  const run = opts.run !== undefined ? await ctx.runs.get(opts.run) : undefined;
  const orgs = opts.org ?? run?.orgs ?? [];
  const s = await writeReverse(ctx, {
    dir: opts.reverse,
    runId: opts.run,
    orgs,
    archiveDir: opts.archive,
    orgIds: opts.orgId,
    redact: opts.redact,
  });
  cli.print(formatReverse(s));
}

export async function reportCommand(
  cli: Cli,
  opts: ReverseFlags & {
    format: 'csv' | 'ndjson';
  },
): Promise<void> {
  checkReverse(opts);
  const config = await cli.config();
  const orgs = opts.org ? opts.org.map((o) => requireOrg(config, o)) : [...config.orgs];
  const ctx = await cli.context(config);
  try {
    await requireReadableRunId(ctx.runs, '--run', opts.run);
    if (opts.reverse !== undefined) return await runReverse(cli, ctx, { ...opts, reverse: opts.reverse });
    // A run past RUN_RETENTION is not unknown: its rows come from the records, and it says so.
    const note = opts.run ? compactedRunNote(await ctx.runs.get(opts.run)) : undefined;
    if (note) cli.warn(note);
    const filter = { orgs, runId: opts.run, status: opts.status };
    if (opts.split) {
      const s = await writeSplit(ctx.store, filter, opts.split);
      cli.print(formatSplit(s));
    } else {
      const rows = await writeReport(ctx.store, filter, {
        format: opts.format,
        out: opts.out,
        stdout: cli.stdout,
      });
      if (opts.out) cli.print(`${rows} rows -> ${opts.out}`);
    }
  } finally {
    await ctx.close();
  }
}
