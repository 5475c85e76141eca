// plan --check: the pre-flight of a CSV cohort against the learner list (ops/preflight.ts).
import { requireOrg } from '../app/context.ts';
import { LearnerTransferError } from '../core/errors.ts';
import { formatPreflight, runPreflight } from '../ops/preflight.ts';
import { applyPreflight, formatApply } from '../ops/preflight-apply.ts';
import type { Cli } from './io.ts';
import { EXIT, requireReadableRunId, runAbortable } from './shared.ts';
import { basename } from 'node:path';

export interface CheckFlags {
  csv?: string | undefined;
  run?: string | undefined;
  org?: string | undefined;
  targetOrgId?: number | undefined;
  out?: string | undefined;
  concurrency?: number | undefined;
  apply?: boolean | undefined;
}

export async function runCheckCommand(cli: Cli, opts: CheckFlags): Promise<void> {
  if (!opts.csv === !opts.run || !opts.org) {
    throw new LearnerTransferError(
      'LT_USAGE',
      'plan --check needs --org KEY and one of --csv FILE or --run ID',
    );
  }
  if (opts.apply && !opts.csv) {
    throw new LearnerTransferError(
      'LT_USAGE',
      "plan --check --apply reads a --csv FILE: a run's learners are already queued (check it without --apply)",
    );
  }
  const config = cli.config({ requireTokens: true });
  const org = requireOrg(config, opts.org);
  const { csv, run } = opts;
  const ctx = await cli.context(config);
  await runAbortable(cli, ctx, 'plan --check interrupted', async (signal) => {
    await requireReadableRunId(ctx.runs, '--run', run);
    const result = await runPreflight(ctx, {
      csv,
      runId: run,
      org,
      targetOrgId: opts.targetOrgId,
      out: opts.out,
      concurrency: opts.concurrency,
      signal,
      remember: Boolean(opts.apply),
    });
    cli.print(formatPreflight(result, csv ? basename(csv) : `run ${run}`, Boolean(opts.apply)));
    if (opts.apply && csv) cli.print(formatApply(await applyPreflight(ctx, result, { csv })));
    cli.exitCode = EXIT.ok;
  });
}
