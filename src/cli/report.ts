import { existsSync } from 'node:fs';
import { Command, Option } from 'commander';
import { requireOrg, type AppContext } from '../app/context.ts';
import { LearnerTransferError } from '../core/errors.ts';
import { formatSplit, writeReport, writeSplit } from '../ops/views/report.ts';
import { formatReverse, writeReverse } from '../ops/actions/reverse.ts';
import { BUCKETS } from '../outcomes/record.ts';
import { requireReadableRunId } from './shared.ts';
import { compactedRunNote } from '../ops/actions/run-retention.ts';
import type { Cli } from './io.ts';
import { orgIdPairOption } from './parsers.ts';

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

/** report --reverse DIR: the organizations are the run's (or --org's), whether they have a token or not. */
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

export function register(program: Command, cli: Cli): void {
  program
    .command('report')
    .description('One row per learner with its outcome code and details, or split result files')
    .option('--run <id>', 'only this run')
    .addOption(new Option('--status <code>', 'only this outcome code or state').choices([...BUCKETS]))
    .addOption(new Option('--format <format>', 'output format').choices(['csv', 'ndjson']).default('csv'))
    .option('--out <file>', 'write here instead of stdout')
    .option('--split <dir>', 'write successes.csv, failures.csv, pending.csv and cancelled.csv into DIR')
    .option('--org <key...>', 'only these organizations')
    .option(
      '--reverse <dir>',
      'write into DIR what moving --run ID (or --org KEY) back would take: a CSV per previous organization ' +
        '(enqueue --csv FILE --move), regrant.csv, unknown.csv and check-by-hand.csv (docs/undo.md)',
    )
    .option(
      '--org-id <key=n>',
      'with --reverse: numeric id of an organization key, to name a previous organization by its key (repeatable)',
      orgIdPairOption,
    )
    .option('--archive <dir>', 'with --reverse: the audit archive to read too (default AUDIT_ARCHIVE_DIR)')
    .option('--redact', 'with --reverse: regrant.csv without e-mail addresses and names (docs/exports.md)')
    .action(
      async (
        opts: ReverseFlags & {
          format: 'csv' | 'ndjson';
        },
      ) => {
        checkReverse(opts);
        const config = cli.config();
        const orgs = opts.org ? opts.org.map((o) => requireOrg(config, o)) : [...config.orgs];
        const ctx = await cli.context(config);
        try {
          await requireReadableRunId(ctx.runs, '--run', opts.run);
          if (opts.reverse !== undefined)
            return await runReverse(cli, ctx, { ...opts, reverse: opts.reverse });
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
      },
    );
}
