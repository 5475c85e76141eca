// --canary N and --auto-approve, alike on enqueue, crawl, reconcile and retry (docs/canary.md).
import { Option, type Command } from 'commander';
import { LearnerTransferError } from '../core/errors.ts';
import type { CanaryMeta } from '../outcomes/runs.ts';
import { positiveInt } from './parsers.ts';

export interface CanaryFlags {
  canary?: number;
  autoApprove?: boolean;
  dryRun?: boolean;
}

export function canaryOption(): Option {
  return new Option(
    '--canary <n>',
    "a new run that sends its first N learners per organization; the others wait for approval ('approve --run ID')",
  ).argParser(positiveInt('--canary'));
}

export function autoApproveOption(): Option {
  return new Option(
    '--auto-approve',
    'with --canary: the rest is released by itself once the canary finished within the error budget (HALT_AT, default 50%)',
  );
}

export function addCanaryOptions(command: Command): Command {
  return command.addOption(canaryOption()).addOption(autoApproveOption());
}

/** The canary of a new run, or undefined; refused where it cannot apply, naming the flag. */
export function canaryOf(opts: CanaryFlags): CanaryMeta | undefined {
  if (opts.autoApprove && opts.canary === undefined)
    throw new LearnerTransferError('LT_USAGE', '--auto-approve needs --canary N');
  if (opts.canary === undefined) return undefined;
  if (opts.dryRun)
    throw new LearnerTransferError(
      'LT_USAGE',
      '--canary with --dry-run: a dry run sends nothing (leave out --canary)',
    );
  return { size: opts.canary, autoApprove: opts.autoApprove === true, approved: {}, refused: {} };
}

/** A canary belongs to a new run: --canary with --run of a run that exists is refused. */
export async function requireNewCanaryRun(
  runs: { exists(id: string): Promise<boolean> },
  canary: CanaryMeta | undefined,
  runId: string | undefined,
): Promise<void> {
  if (!canary || runId === undefined || !(await runs.exists(runId))) return;
  throw new LearnerTransferError(
    'LT_USAGE',
    `--canary with --run ${runId}: that run exists; a canary is judged on a run of its own (leave out --run)`,
  );
}

/** "  canary     10 per organization sent first; 90 wait for approval (approve --run R)". */
export function formatCanaryLine(runId: string, canary: CanaryMeta, awaiting: number): string {
  return (
    `  canary     the first ${canary.size} per organization are sent; ${awaiting} wait for approval ` +
    (canary.autoApprove
      ? `(released by themselves once the canary finished within the error budget, or 'learner-transfer approve --run ${runId}')`
      : `('learner-transfer approve --run ${runId}')`)
  );
}
