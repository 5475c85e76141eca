import { requireOrg } from '../app/context.ts';
import { cliActor } from '../limiter/control-log.ts';
import { describeSelection, requeueSelected, selectRetry } from '../ops/actions/retry.ts';
import { confirmRetry } from './retry-confirm.ts';
import { RETRY_NOTES, retryKind } from '../ops/actions/retry-risk.ts';
import { forTerminal } from '../core/terminal-safe.ts';
import { requireReadableRunId } from './shared.ts';
import type { Cli } from './io.ts';
import { canaryOf, formatCanaryLine } from './canary-flags.ts';

export interface RetryFlags {
  status?: string;
  learner?: number[];
  run?: string;
  org?: string[];
  move?: boolean;
  yes?: boolean;
  canary?: number;
  autoApprove?: boolean;
}

/** Selects, asks about what a retry cannot help (or takes --yes), re-queues, says what it did. */
export async function runRetry(cli: Cli, opts: RetryFlags): Promise<void> {
  const canary = canaryOf(opts);
  const config = await cli.config({ requireTokens: true });
  const orgs = opts.org ? opts.org.map((o) => requireOrg(config, o)) : [...config.orgs];
  const ctx = await cli.context(config);
  try {
    await requireReadableRunId(ctx.runs, '--run', opts.run);
    const filter = { orgs, status: opts.status, learnerIds: opts.learner, runId: opts.run };
    // What it would touch, first (the dashboard's dry run): outcomes a retry cannot help are asked.
    const selection = await selectRetry(ctx, filter);
    if (!(await confirmRetry(cli, describeSelection(selection), opts.yes === true))) return;
    const s = await requeueSelected(ctx, selection, {
      move: opts.move,
      // The change log: who, the counts and the filter as given (one entry per organization).
      who: cliActor(),
      filter: {
        status: opts.status,
        learners: opts.learner?.length,
        run: opts.run,
        orgs: opts.org,
        move: opts.move,
        ...(canary ? { canary: canary.size } : {}),
      },
      canary,
    });
    const byOrg = Object.entries(s.byOrg).map(([o, n]) => `${o} ${n}`);
    cli.print(
      `re-queued ${s.requeued} learner${s.requeued === 1 ? '' : 's'}` +
        (byOrg.length ? ` (${byOrg.join(', ')})` : ''),
    );
    if (canary && s.canary) cli.print(formatCanaryLine(s.canary.runId, canary, s.canary.awaitingApproval));
    // Confirmed with --yes, not asked: what a retry cannot help is said in the command's output.
    if (opts.yes)
      for (const code of s.confirm) cli.warn(`${s.byCode[code]} ${code}: ${RETRY_NOTES[retryKind(code)]}`);
    for (const k of s.skipped)
      cli.warn(
        forTerminal(`learner ${k.learnerId} (${k.org}): not retried: ${k.reason}`, { singleLine: true }),
      );
  } finally {
    await ctx.close();
  }
}
