import { Command, Option } from 'commander';
import { requireOrg } from '../app/context.ts';
import { cliActor } from '../limiter/control-log.ts';
import { retryFailed } from '../ops/retry.ts';
import { RETRY_NOTES, retryKind } from '../ops/retry-risk.ts';
import { BUCKETS } from '../outcomes/record.ts';
import { forTerminal } from '../core/terminal-safe.ts';
import { requireReadableRunId } from './shared.ts';
import type { Cli } from './io.ts';
import { learnerIdOption } from './parsers.ts';
import { autoApproveOption, canaryOf, canaryOption, formatCanaryLine } from './canary-flags.ts';

export function register(program: Command, cli: Cli): void {
  program
    .command('retry')
    .description('Re-queue failed learners with fresh attempts (all failures, or by outcome, learner or run)')
    .addOption(
      new Option('--status <code>', 'only this outcome code').choices(
        BUCKETS.filter(
          (b) => b !== 'queued' && b !== 'retrying' && b !== 'transferred' && b !== 'already-in-org',
        ),
      ),
    )
    .addOption(
      new Option('--learner <id...>', 'only these learner ids').argParser(
        (v: string, prev: number[] = []) => [...prev, learnerIdOption('--learner')(v)],
      ),
    )
    .option('--run <id>', 'only learners of this run')
    .option('--org <key...>', 'only these organizations')
    .option(
      '--move',
      'move learners now claimed by another organization back here (written in the audit); only learners done or failed there move',
    )
    .addOption(canaryOption())
    .addOption(autoApproveOption())
    .action(
      async (opts: {
        status?: string;
        learner?: number[];
        run?: string;
        org?: string[];
        move?: boolean;
        canary?: number;
        autoApprove?: boolean;
      }) => {
        const canary = canaryOf(opts);
        const config = cli.config({ requireTokens: true });
        const orgs = opts.org ? opts.org.map((o) => requireOrg(config, o)) : [...config.orgs];
        const ctx = await cli.context(config);
        try {
          await requireReadableRunId(ctx.runs, '--run', opts.run);
          const s = await retryFailed(
            ctx,
            { orgs, status: opts.status, learnerIds: opts.learner, runId: opts.run, move: opts.move },
            {
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
            },
          );
          cli.print(
            `re-queued ${s.requeued} learner${s.requeued === 1 ? '' : 's'}` +
              (Object.keys(s.byOrg).length
                ? ` (${Object.entries(s.byOrg)
                    .map(([o, n]) => `${o} ${n}`)
                    .join(', ')})`
                : ''),
          );
          if (canary && s.canary)
            cli.print(formatCanaryLine(s.canary.runId, canary, s.canary.awaitingApproval));
          // A retry the CLI was told to make is made; what it cannot help is said (the dashboard asks first).
          for (const code of s.confirm)
            cli.warn(`${s.byCode[code]} ${code}: ${RETRY_NOTES[retryKind(code)]}`);
          for (const k of s.skipped)
            cli.warn(
              forTerminal(`learner ${k.learnerId} (${k.org}): not retried: ${k.reason}`, {
                singleLine: true,
              }),
            );
        } finally {
          await ctx.close();
        }
      },
    );
}
