// plan --check: the pre-flight of a CSV cohort against the learner list (ops/preflight.ts).
import { requireOrg } from '../app/context.ts';
import { LearnerTransferError } from '../core/errors.ts';
import { formatPreflight, runPreflight } from '../ops/preflight.ts';
import { applyPreflight, formatApply } from '../ops/preflight-apply.ts';
import type { Cli } from './io.ts';
import { EXIT, runAbortable } from './shared.ts';

export interface CheckFlags {
  csv?: string | undefined;
  org?: string | undefined;
  targetOrgId?: number | undefined;
  out?: string | undefined;
  concurrency?: number | undefined;
  apply?: boolean | undefined;
}

export async function runCheckCommand(cli: Cli, opts: CheckFlags): Promise<void> {
  if (!opts.csv || !opts.org) {
    throw new LearnerTransferError('LT_USAGE', 'plan --check needs --csv FILE and --org KEY');
  }
  const config = cli.config({ requireTokens: true });
  const org = requireOrg(config, opts.org);
  const csv = opts.csv;
  const ctx = await cli.context(config);
  await runAbortable(cli, ctx, 'plan --check interrupted', async (signal) => {
    const result = await runPreflight(ctx, {
      csv,
      org,
      targetOrgId: opts.targetOrgId,
      out: opts.out,
      concurrency: opts.concurrency,
      signal,
      remember: Boolean(opts.apply),
    });
    cli.print(formatPreflight(result, csv, Boolean(opts.apply)));
    if (opts.apply) cli.print(formatApply(await applyPreflight(ctx, result, { csv })));
    cli.exitCode = EXIT.ok;
  });
}
