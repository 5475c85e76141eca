// `cancel`: withdraw learners before their call, by run, CSV file or learner id.
import { requireOrg } from '../app/context.ts';
import { LearnerTransferError } from '../core/errors.ts';
import { forTerminal, jsonForTerminal } from '../core/terminal-safe.ts';
import { cliActor } from '../limiter/control-log.ts';
import { cancelLearners, type CancelFilter, type CancelSummary } from '../ops/actions/cancel.ts';
import { readCancelCsv } from '../ops/actions/cancel-csv.ts';
import type { Cli } from './io.ts';
import { requireReadableRunId } from './shared.ts';

export interface CancelFlags {
  org?: string;
  run?: string;
  csv?: string;
  learner?: number[];
  dryRun?: boolean;
  json?: boolean;
}

const plural = (n: number, one: string) => `${n} ${one}${n === 1 ? '' : 's'}`;
const ids = (list: readonly { learnerId: number }[], n: number) =>
  list.map((l) => l.learnerId).join(', ') + (n > list.length ? ', ...' : '');

/** "cancelled 37 learners of run r-1, 2 in flight (they finish: 1042, 1043), 5 already done". */
export function formatCancel(s: CancelSummary, scope: string): string {
  const parts = [`${s.dryRun ? 'would cancel' : 'cancelled'} ${plural(s.cancelled, 'learner')}${scope}`];
  if (s.inFlight.length > 0) {
    parts.push(
      `${s.inFlight.length} in flight (they finish: ${ids(s.inFlight.slice(0, 20), s.inFlight.length)})`,
    );
  }
  for (const n of s.notCancellable) {
    const what = {
      done: 'already done',
      failed: 'failed already (not cancelled; retry leaves them unless asked)',
      'already-cancelled': 'cancelled already',
      unknown: `unknown (no record: ${ids(n.learners, n.count)})`,
      changed: 'changed meanwhile (run cancel again)',
    }[n.reason];
    parts.push(`${n.count} ${what}`);
  }
  const lines = [parts.join(', ')];
  const orgs = Object.entries(s.byOrg);
  if (orgs.length > 1) lines.push(`  by organization: ${orgs.map(([o, n]) => `${o} ${n}`).join(', ')}`);
  if (s.jobsLeftToWorkers > 0) {
    lines.push(`  ${plural(s.jobsLeftToWorkers, 'job')} in a worker's hands end without a call`);
  }
  if (s.dryRun) lines.push('  dry run: nothing was changed');
  return lines.join('\n');
}

export async function cancelCommand(cli: Cli, opts: CancelFlags): Promise<void> {
  const given = (['run', 'csv', 'learner'] as const).filter((f) => opts[f] !== undefined);
  if (given.length !== 1) {
    throw new LearnerTransferError(
      'LT_USAGE',
      given.length === 0
        ? 'cancel needs one of --run ID, --csv FILE or --learner ID[,ID...]'
        : `cancel takes one of --run, --csv and --learner, got ${given.map((f) => `--${f}`).join(' and ')}`,
    );
  }
  const config = await cli.config();
  const orgs = opts.org ? [requireOrg(config, opts.org)] : [...config.orgs];
  const filter: CancelFilter = { orgs, dryRun: opts.dryRun === true };
  let scope = '';
  let rejects: { line: number; reason: string }[] = [];
  if (opts.csv) {
    const read = await readCancelCsv({ file: opts.csv, defaultOrg: opts.org, knownOrgs: config.orgs });
    rejects = read.rejects;
    rejects
      .slice(0, 10)
      .forEach((r) => cli.warn(forTerminal(`${opts.csv}:${r.line}: ${r.reason}`, { singleLine: true })));
    if (rejects.length > 10) cli.warn(`(${rejects.length - 10} more rejected rows)`);
    if (read.learners.length === 0) {
      throw new LearnerTransferError('LT_INPUT_INVALID', `${opts.csv}: no valid learner id was read`);
    }
    filter.learners = read.learners;
    filter.describe = `csv ${opts.csv}`;
    scope = ` of ${opts.csv}`;
  } else if (opts.learner) {
    filter.learnerIds = opts.learner;
    filter.describe = `learner ${opts.learner.join(',')}`;
  }
  const ctx = await cli.context(config);
  try {
    if (opts.run) {
      await requireReadableRunId(ctx.runs, '--run', opts.run);
      if (!(await ctx.runs.exists(opts.run)))
        throw new LearnerTransferError(
          'LT_USAGE',
          `--run ${opts.run}: no such run (see status or the dashboard's runs)`,
        );
      filter.runId = opts.run;
      filter.describe = `run ${opts.run}`;
      scope = ` of run ${opts.run}`;
    }
    const summary = await cancelLearners(ctx, filter, cliActor());
    cli.print(
      opts.json
        ? jsonForTerminal(JSON.stringify({ ...summary, ...(opts.csv ? { rejects } : {}) }, null, 2))
        : forTerminal(formatCancel(summary, scope)),
    );
  } finally {
    await ctx.close();
  }
}
