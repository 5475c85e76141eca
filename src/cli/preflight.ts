// plan --check: the pre-flight of a CSV cohort against the learner list.
import { requireOrg } from '../app/context.ts';
import { LearnerTransferError } from '../core/errors.ts';
import { defaultCheckFile, formatPreflight, runPreflight } from '../ops/intake/preflight.ts';
import { applyPreflight, formatApply } from '../ops/intake/preflight-apply.ts';
import type { Cli } from './io.ts';
import { EXIT, requireReadableRunId, runAbortable } from './shared.ts';
import { statSync } from 'node:fs';
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
  const config = await cli.config({ requireTokens: true });
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
    });
    cli.print(formatPreflight(result, csv ? basename(csv) : `run ${run}`, Boolean(opts.apply)));
    if (opts.apply && csv) cli.print(formatApply(await applyPreflight(ctx, result, { csv })));
    else if (csv) cli.print(applyHint(csv, org, opts.out));
    cli.exitCode = EXIT.ok;
  });
}

/** A word as a POSIX shell reads it: as is when it is plain, else in single quotes. */
export function shellWord(word: string): string {
  return /^[\w./:@%+=,-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

/**
 * What a check ends with: the exact command that applies it (a plain `enqueue` of the CSV would
 * send every learner, those the check found not worth a call too).
 */
export function applyHint(csv: string, org: string, out: string | undefined): string {
  const words = ['plan', '--check', '--apply', '--csv', csv, '--org', org, ...(out ? ['--out', out] : [])];
  return [
    'to enqueue the learners worth a call (in-target recorded done, unknown and no-user held: no call for them):',
    `  npx learner-transfer ${words.map(shellWord).join(' ')}`,
  ].join('\n');
}

/**
 * What `enqueue` of a CSV with a check beside it says before sending: it does not use the check,
 * and which command does (docs/preflight.md). Undefined: no check.
 */
export function checkBesideNote(csv: string, org: string | undefined): string | undefined {
  const file = defaultCheckFile(csv);
  let written: Date;
  try {
    written = statSync(file).mtime;
  } catch {
    return undefined;
  }
  const words = ['plan', '--check', '--apply', '--csv', csv, '--org'].map(shellWord).join(' ');
  return (
    `${file}: a pre-flight check of ${basename(csv)}, written ${written.toISOString()}. enqueue does not use it: ` +
    'every learner of the file is sent, those the check found in the organization, unknown or without a user too. ' +
    `To enqueue only the learners worth a call, run instead: npx learner-transfer ${words} ${org ? shellWord(org) : 'KEY'}`
  );
}
