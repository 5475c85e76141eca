// retry asks as the dashboard does: a retry of outcomes a retry cannot help goes ahead only when
// a person says so at the terminal, or with --yes in a script (docs/commands.md, retry).
import { LearnerTransferError } from '../core/errors.ts';
import type { RetrySummary } from '../ops/actions/retry.ts';
import { RETRY_NOTES, retryKind } from '../ops/actions/retry-risk.ts';
import type { Cli } from './io.ts';

/** What a retry would re-queue, one line per outcome, with what a retry can do for it. */
export function retryCountLines(s: RetrySummary): string[] {
  const codes = Object.keys(s.byCode);
  const width = Math.max(...codes.map((c) => c.length));
  const count = Math.max(...codes.map((c) => String(s.byCode[c]).length));
  return codes.map(
    (c) =>
      `  ${c.padEnd(width)}  ${String(s.byCode[c]).padStart(count)}  ${RETRY_NOTES[retryKind(c)]}` +
      (s.confirm.includes(c) ? ' [needs confirmation]' : ''),
  );
}

function needing(s: RetrySummary): string {
  return s.confirm.map((c) => `${s.byCode[c]} ${c}`).join(', ');
}

/** One line of the terminal, or null at its end (Ctrl-D) or when it closes. */
function readLine(input: NonNullable<Cli['stdin']>): Promise<string | null> {
  return new Promise((resolve) => {
    let text = '';
    const finish = (line: string | null) => {
      input.off('data', onData);
      input.off('end', onEnd);
      input.off('close', onEnd);
      input.pause();
      resolve(line);
    };
    const onData = (chunk: Buffer | string) => {
      text += chunk.toString();
      const nl = text.indexOf('\n');
      if (nl >= 0) finish(text.slice(0, nl).replace(/\r$/, ''));
    };
    const onEnd = () => finish(null);
    input.on('data', onData);
    input.on('end', onEnd);
    input.on('close', onEnd);
    input.resume();
  });
}

/**
 * Whether the retry of `plan` may go ahead: when nothing in it needs a confirmation, with --yes,
 * or when the person at the terminal types yes. In a script without --yes it throws (exit 2).
 */
export async function confirmRetry(cli: Cli, plan: RetrySummary, yes: boolean): Promise<boolean> {
  if (plan.confirm.length === 0 || yes) return true;
  const input = cli.stdin;
  if (!input?.isTTY) {
    throw new LearnerTransferError(
      'LT_USAGE',
      `retry would re-queue ${needing(plan)}, which a retry cannot help or which the pre-flight held on ` +
        `purpose (${[...new Set(plan.confirm.map((c) => RETRY_NOTES[retryKind(c)]))].join('; ')}). ` +
        'Nothing was re-queued: add --yes to retry them anyway, or narrow the filter (--status CODE, --learner ID)',
    );
  }
  cli.warn(
    [
      `retry would re-queue ${plan.matched} learner${plan.matched === 1 ? '' : 's'}, by outcome:`,
      ...retryCountLines(plan),
    ].join('\n'),
  );
  cli.stderr.write(`retry anyway, ${needing(plan)} included? type yes to re-queue them all: `);
  const answer = await readLine(input);
  if (answer?.trim().toLowerCase() === 'yes') return true;
  cli.warn('nothing re-queued (narrow the filter to retry the others: --status CODE)');
  return false;
}
