// `approve --run ID`: release the learners of a canary run that await approval after its canary
// (ops/actions/canary.ts, docs/canary.md). Written in the change log with its author.
import { requireOrg } from '../app/context.ts';
import { forTerminal, jsonForTerminal } from '../core/terminal-safe.ts';
import { cliActor } from '../limiter/control-log.ts';
import {
  approveRun,
  canaryCounts,
  canaryRun,
  canaryVerdict,
  DEFAULT_HALT_AT,
  type ApproveSummary,
} from '../ops/actions/canary.ts';
import type { RunCounts } from '../outcomes/store.ts';
import type { Cli } from './io.ts';
import { requireReadableRunId } from './shared.ts';

export interface ApproveFlags {
  run: string;
  org?: string;
  dryRun?: boolean;
  json?: boolean;
}

const plural = (n: number, one: string) => `${n} ${one}${n === 1 ? '' : 's'}`;

/** "approved run R: 90 learners released (acme 90); its canary: 10 of 10 transferred, 0 failed". */
export function formatApprove(s: ApproveSummary, canary: string): string {
  const orgs = Object.entries(s.byOrg);
  return [
    `${s.dryRun ? 'would release' : `approved run ${s.runId}:`} ${plural(s.released, 'learner')}` +
      `${s.dryRun ? ` of run ${s.runId}` : ' released'}` +
      (orgs.length > 0 ? ` (${orgs.map(([o, n]) => `${o} ${n}`).join(', ')})` : ''),
    `  its canary: ${canary}`,
    ...(s.dryRun ? ['  dry run: nothing was changed'] : []),
  ].join('\n');
}

export async function approveCommand(cli: Cli, opts: ApproveFlags): Promise<void> {
  const config = await cli.config();
  const orgs = opts.org ? [requireOrg(config, opts.org)] : undefined;
  const ctx = await cli.context(config);
  try {
    await requireReadableRunId(ctx.runs, '--run', opts.run);
    const run = await canaryRun(ctx, opts.run);
    const total: RunCounts = {};
    for (const org of orgs ?? run.orgs) {
      for (const [k, v] of Object.entries(await ctx.store.runCounts(org, run.id)))
        total[k as keyof RunCounts] = (total[k as keyof RunCounts] ?? 0) + v;
    }
    const canary = canaryCounts(canaryVerdict(total, DEFAULT_HALT_AT));
    const summary = await approveRun(ctx, opts.run, cliActor(), { orgs, dryRun: opts.dryRun === true });
    cli.print(
      opts.json
        ? jsonForTerminal(JSON.stringify({ ...summary, canary }, null, 2))
        : forTerminal(formatApprove(summary, canary)),
    );
  } finally {
    await ctx.close();
  }
}
