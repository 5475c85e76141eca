import { canaryOf, formatCanaryLine, requireNewCanaryRun } from './canary-flags.ts';
import { requireOrg } from '../app/context.ts';
import { Progress } from './progress-line.ts';
import { forTerminal } from '../core/terminal-safe.ts';
import { formatPlan } from '../ops/intake/plan.ts';
import { reconcileAndPlan } from '../ops/intake/reconcile.ts';
import { formatReconcileSummary } from '../queue/sources/reconcile.ts';
import { EXIT, runAbortable } from './shared.ts';
import type { Cli } from './io.ts';

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

export async function runReconcileCommand(cli: Cli, opts: ReconcileFlags): Promise<void> {
  const config = await cli.config({ requireBaseUrl: true, requireTokens: true });
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
