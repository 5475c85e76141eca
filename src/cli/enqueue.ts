import { requireOrg, type AppContext } from '../app/context.ts';
import { LearnerTransferError } from '../core/errors.ts';
import { enqueueCsv, type EnqueueCsvSummary } from '../queue/enqueue-csv.ts';
import { fileSize } from '../queue/sources/csv.ts';
import { newRunId } from '../outcomes/runs.ts';
import { Progress } from './progress-line.ts';
import { assertPrivateTarget } from '../core/private-file.ts';
import { EXIT, rejectPrinter, requireOrgSource } from './shared.ts';
import { basename, join } from 'node:path';
import { runCsvPlan } from './plan.ts';
import { checkBesideNote } from './preflight.ts';
import { formatClaimedElsewhere, claimedElsewhereTotal, type Producer } from '../queue/producer.ts';
import { appendChange, cliActor } from '../limiter/control-log.ts';
import { urgentChange, type Priority, type UrgentBatch } from '../queue/priority.ts';
import type { Cli } from './io.ts';
import { canaryOf, formatCanaryLine, requireNewCanaryRun } from './canary-flags.ts';
import type { CanaryMeta } from '../outcomes/runs.ts';

/** What `--priority urgent` did over the whole file. */
interface UrgentTotals {
  added: number;
  moved: number;
  inFlight: number;
  finished: number;
}

export function formatUrgent(t: UrgentTotals): string {
  const ahead = t.added + t.moved;
  return (
    `  urgent     ${ahead} put ahead of the bulk (${t.added} added, ${t.moved} already waiting moved ahead)` +
    (t.inFlight ? `, ${t.inFlight} already in flight` : '') +
    (t.finished ? `, ${t.finished} finished meanwhile` : '')
  );
}

export function formatEnqueueSummary(s: EnqueueCsvSummary): string {
  const done = Object.entries(s.alreadyDone)
    .map(([b, n]) => `${n} ${b}`)
    .join(', ');
  return [
    `run ${s.runId}: ${s.file}`,
    `  read       ${s.read} rows`,
    `  enqueued   ${s.enqueued}`,
    `  already queued ${s.alreadyQueued}`,
    `  already done   ${Object.values(s.alreadyDone).reduce((a, b) => a + (b ?? 0), 0)}${done ? ` (${done})` : ''}`,
    `  rejected   ${s.rejected}${s.rejectsFile ? ` -> ${s.rejectsFile}` : ''}${
      claimedElsewhereTotal(s)
        ? ` (${claimedElsewhereTotal(s)} claimed by another organization: ${formatClaimedElsewhere(s)})`
        : ''
    }`,
    ...(s.moved ? [`  moved      ${s.moved} from another organization (--move; written in the audit)`] : []),
    `  by organization: ${
      Object.entries(s.byOrg)
        .map(([o, n]) => `${o} ${n}`)
        .join(', ') || 'none'
    }`,
  ].join('\n');
}

export interface EnqueueFlags {
  csv: string;
  org?: string;
  rejects?: string;
  run?: string;
  batch: number;
  priority: Priority;
  quiet?: boolean;
  dryRun?: boolean;
  move?: boolean;
  canary?: number;
  autoApprove?: boolean;
}

/** The run the file's learners join, made when it does not exist yet. */
async function openRun(
  ctx: AppContext,
  runId: string,
  opts: EnqueueFlags,
  canary?: CanaryMeta,
): Promise<void> {
  if (!(await ctx.runs.get(runId))) {
    await ctx.runs.create({
      id: runId,
      kind: 'csv',
      source: basename(opts.csv),
      orgs: opts.org ? [opts.org] : [],
      ...(canary ? { canary } : {}),
    });
  }
}

/**
 * --priority urgent: each add goes on the head of its queue, and each batch is written in the
 * change log as soon as it is done. Returns the producer and what it did.
 */
function urgentProducer(ctx: AppContext, opts: EnqueueFlags): { producer: Producer; urgent: UrgentTotals } {
  const urgent: UrgentTotals = { added: 0, moved: 0, inFlight: 0, finished: 0 };
  if (opts.priority !== 'urgent') return { producer: ctx.producer, urgent };
  const who = cliActor();
  const onUrgent = async (b: UrgentBatch) => {
    urgent.added += b.added.length;
    urgent.moved += b.moved.length;
    urgent.inFlight += b.inFlight.length;
    urgent.finished += b.gone.length;
    await appendChange(ctx.redis, ctx.keys, urgentChange(b, who, `cli enqueue --csv ${basename(opts.csv)}`));
  };
  return { producer: ctx.producer.withDefaults({ priority: 'urgent', onUrgent }), urgent };
}

export async function enqueueCommand(cli: Cli, opts: EnqueueFlags): Promise<void> {
  const canary = canaryOf(opts);
  if (opts.dryRun) return runCsvPlan(cli, opts);
  const config = await cli.config({ requireTokens: true });
  if (opts.org) requireOrg(config, opts.org);
  const total = await fileSize(opts.csv);
  const checked = checkBesideNote(opts.csv, opts.org);
  if (checked) cli.warn(checked);
  await requireOrgSource(opts.csv, opts.org, config.orgs);
  const ctx = await cli.context(config);
  try {
    const runId = opts.run ?? newRunId();
    const rejectsFile = opts.rejects ?? join('out', runId, 'rejects.csv');
    // A link planted at the rejects path refuses the command before it writes anything, a run too.
    assertPrivateTarget(rejectsFile);
    await requireNewCanaryRun(ctx.runs, canary, opts.run);
    await openRun(ctx, runId, opts, canary);
    const started = Date.now();
    const progress = new Progress({
      label: `enqueue ${basename(opts.csv)}`,
      total,
      stream: cli.stderr,
      enabled: !opts.quiet,
    });
    const { producer, urgent } = urgentProducer(ctx, opts);
    const summary = await enqueueCsv(
      { producer: canary ? producer.withDefaults({ canary: canary.size }) : producer, runs: ctx.runs },
      {
        file: opts.csv,
        defaultOrg: opts.org,
        knownOrgs: config.orgs,
        runId,
        rejectsFile,
        batchSize: opts.batch,
        move: opts.move === true,
        onProgress: (rows, bytes, c) =>
          progress.update(
            bytes,
            `${rows} rows (${Math.round(rows / Math.max(0.001, (Date.now() - started) / 1000))}/s), ${c.enqueued} enqueued, ${c.rejected} rejected`,
          ),
        onReject: rejectPrinter(cli, opts.csv, '(more rejects: see the rejects file)'),
      },
    );
    progress.end(`${summary.read} rows, ${summary.enqueued} enqueued, ${summary.rejected} rejected`);
    cli.print(formatEnqueueSummary(summary));
    if (opts.priority === 'urgent') cli.print(formatUrgent(urgent));
    if (canary) cli.print(formatCanaryLine(runId, canary, summary.awaitingApproval));
    if (summary.valid === 0) {
      throw new LearnerTransferError(
        'LT_INPUT_INVALID',
        `${opts.csv}: no valid learner id was read${summary.read === 0 ? ' (the file has no data rows)' : ''}`,
      );
    }
    cli.exitCode = EXIT.ok;
  } finally {
    await ctx.close();
  }
}
