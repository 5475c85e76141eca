import { Command, Option } from 'commander';
import {
  autoApproveOption,
  canaryOf,
  canaryOption,
  formatCanaryLine,
  requireNewCanaryRun,
} from './canary-flags.ts';
import { requireOrg } from '../app/context.ts';
import { Progress } from './progress-line.ts';
import { forTerminal } from '../core/terminal-safe.ts';
import { formatPlan } from '../ops/intake/plan.ts';
import { reconcileAndPlan } from '../ops/intake/reconcile.ts';
import { formatReconcileSummary } from '../queue/sources/reconcile.ts';
import { EXIT, runAbortable } from './shared.ts';
import type { Cli } from './io.ts';
import { positiveInt, runIdOption, orgIdPairOption } from './parsers.ts';

export interface ReconcileFlags {
  desired: string;
  org?: string;
  orgId?: Record<string, number>;
  out?: string;
  run?: string;
  concurrency: number;
  dryRun?: boolean;
  quiet?: boolean;
  /** plan --desired --tokens N */
  tokens?: number;
  canary?: number;
  autoApprove?: boolean;
}

/** The reconcile flags, shared with `plan --desired` and `schedule reconcile`. */
export function addReconcileOptions(cmd: Command): Command {
  return cmd
    .option('--org <key>', 'organization for rows without an org column')
    .option(
      '--org-id <key=n>',
      'numeric id of an organization key as the list shows it (repeatable; remembered in Redis)',
      orgIdPairOption,
    )
    .addOption(
      new Option('--concurrency <n>', 'pages read at once')
        .argParser(positiveInt('--concurrency', 64))
        .default(4),
    );
}

export async function runReconcileCommand(cli: Cli, opts: ReconcileFlags): Promise<void> {
  const config = cli.config({ requireBaseUrl: true, requireTokens: true });
  if (opts.org) requireOrg(config, opts.org);
  const canary = canaryOf(opts);
  const ctx = await cli.context(config);
  await runAbortable(cli, ctx, 'reconcile interrupted: nothing is lost, run it again', async (signal) => {
    await requireNewCanaryRun(ctx.runs, canary, opts.run);
    const progress = new Progress({
      label: 'reconcile',
      unit: 'pages',
      stream: cli.stderr,
      enabled: !opts.quiet,
    });
    let shown = 0;
    const { summary, plans } = await reconcileAndPlan(
      ctx,
      {
        file: opts.desired,
        defaultOrg: opts.org,
        orgIds: opts.orgId,
        runId: opts.run,
        canary,
        outDir: opts.out,
        dryRun: Boolean(opts.dryRun),
        concurrency: opts.concurrency,
        signal,
        onProgress: (done, last, matched) =>
          progress.update(done, `page ${done}/${last}, ${matched} desired found`),
        onReject: (line, reason) => {
          if (shown++ < 10) cli.warn(forTerminal(`${opts.desired}:${line}: ${reason}`, { singleLine: true }));
        },
      },
      opts.tokens,
    );
    progress.end(`${summary.requests} page reads`);
    cli.print(formatReconcileSummary(summary));
    if (canary && summary.runId) cli.print(formatCanaryLine(summary.runId, canary, summary.awaitingApproval));
    if (plans) cli.print(formatPlan(plans, 'reconcile'));
    cli.exitCode = EXIT.ok;
  });
}

export function register(program: Command, cli: Cli): void {
  addReconcileOptions(
    program
      .command('reconcile')
      .description(
        'Compare a desired-state CSV (learner id, org) with the learner list and enqueue the drift (re-opens finished learners)',
      )
      .requiredOption('--desired <file>', 'CSV of learner ids and organization keys (header learnerId,org)'),
  )
    .option('--out <dir>', 'where to write the drift report (default out/<run>)')
    .addOption(
      new Option('--run <id>', "run id: letters, digits, '-' and '_' (default: a new one)").argParser(
        runIdOption('--run'),
      ),
    )
    .option('--dry-run', 'only plan: drift, counts and ETA; no queue writes, no report, no transfers')
    .option('--quiet', 'no progress output')
    .addOption(canaryOption())
    .addOption(autoApproveOption())
    .action((opts: ReconcileFlags) => runReconcileCommand(cli, opts));
}
