// The verdict on a drained seeded run, as a list of violations (empty: the seed passed), so that it serves
// the vitest file and the standalone runner alike: the outcome store (outcomes-check-core.ts: one final state each, at
// most one owner change, one call in flight, every answered revocation in the audit), refusals only where
// the run made them or with a stated reason, `repair --dry-run` finds nothing, no token in the Redis or in
// any output, no 429 and no window over the limits.
import { BUCKETS, FAILURE_BUCKETS, isFinalBucket, type Bucket } from '../../src/outcomes/record.ts';
import { type CliResult, runCommand } from '../helpers/cli.ts';
import { checkOutcomes, type OutcomeFindings } from '../helpers/outcomes-check-core.ts';
import { dumpKeys } from '../helpers/redis.ts';
import type { Applied, Stage } from './apply-fault.ts';

export interface Verdict {
  violations: string[];
  /** Things worth a look that break no invariant (a learner failed by chance, say). */
  notes: string[];
  outcomes: OutcomeFindings;
}

const EXPECTED_FAILURE: Record<string, (s: Stage) => readonly number[]> = {
  forbidden: (s) => s.run.forbidden,
  'not-found': (s) => s.run.missing,
  'server-error': (s) => s.run.failing,
};

/** Failures only for learners the run made refusable (with their own code), or with a stated reason. */
function refusals(stage: Stage, outcomes: OutcomeFindings, verdict: Verdict): void {
  const refusable = new Set([...stage.run.forbidden, ...stage.run.failing, ...stage.run.missing]);
  stage.run.ids.forEach((id, i) => {
    const rec = outcomes.records[i];
    if (!rec) return;
    const bucket = rec.b as Bucket;
    if (!FAILURE_BUCKETS.includes(bucket)) {
      if (refusable.has(id))
        verdict.violations.push(`learner ${id}: the service refuses it, yet '${bucket}'`);
      return;
    }
    if (!rec.c || !(rec.m || rec.e))
      verdict.violations.push(`learner ${id}: '${bucket}' without a stated code and message`);
    if (!EXPECTED_FAILURE[bucket]?.(stage).includes(id))
      verdict.notes.push(
        `learner ${id} failed: '${bucket}' (${rec.s ?? '-'} ${rec.e ?? ''}: ${rec.m ?? ''})`,
      );
  });
}

/** A revocation lost after a worker was frozen past its request timeout: the stalled-worker loss come back. */
function stallHint(stage: Stage, applied: readonly Applied[], verdict: Verdict): void {
  const lost = verdict.violations.some((v) => v.startsWith('revoked authorization missing'));
  const long = applied.some(
    (a) => a.event.kind === 'worker-stop' && a.event.ms > stage.run.requestTimeoutMs && a.inFlight > 0,
  );
  if (lost && long)
    verdict.notes.push(
      'a worker was frozen (SIGSTOP) longer than REQUEST_TIMEOUT with calls in flight: answers thrown away ' +
        'by timers that fired before the sockets were read would look like this',
    );
}

async function repairFindsNothing(stage: Stage): Promise<[string[], CliResult]> {
  const r = await runCommand(['repair', '--dry-run'], stage.h.env, 60_000);
  const ok = r.code === 0 && r.stdout.includes('nothing to repair');
  return [ok ? [] : [`repair --dry-run exited ${r.code}: ${(r.stdout + r.stderr).trim().slice(0, 800)}`], r];
}

/** No token, whole or its random tail, in any key or value of the run's Redis nor in any output. */
async function tokenLeaks(stage: Stage, outputs: readonly string[]): Promise<string[]> {
  const dump = (await dumpKeys(stage.h.ctx.redis, '*')).join('\n');
  const logs = [...outputs, ...stage.h.logLines].join('\n');
  const out: string[] = [];
  // The scan is real: the run's records and the workers' log lines are in what was read.
  if (!dump.includes('transferred')) out.push('the Redis scan found no outcome record: it read nothing');
  if (!logs.includes('transfer outcome')) out.push('the outputs hold no transfer log line: nothing was read');
  for (const [i, token] of stage.run.tokens.entries()) {
    for (const part of [token, token.slice(-16)]) {
      if (dump.includes(part)) out.push(`token ${i + 1} of acme is in Redis`);
      if (logs.includes(part)) out.push(`token ${i + 1} of acme is in a log or an output`);
    }
  }
  if (dump.includes('<unread ')) out.push('the Redis scan met a type it cannot read');
  return [...new Set(out)];
}

function limitViolations(stage: Stage): string[] {
  const { sim } = stage.h;
  const out: string[] = [];
  const refused = sim.record.filter((r) => r.status === 429);
  // One violation, with each 429 and the calls its token had counted just before it, in the schedule's
  // time (seconds after the first transfer call): enough to tell which fault let a call through late.
  const patches = sim.record.filter((r) => r.method === 'PATCH');
  const t0 = patches[0]?.receivedAt ?? 0;
  const at = (t: number | undefined) => (t === undefined ? '-' : ((t - t0) / 1000).toFixed(2));
  const detail = refused.map((r) => {
    const before = patches
      .filter((x) => x.tokenLabel === r.tokenLabel && x.countedAt !== undefined && x.seq < r.seq)
      .slice(-8)
      .map(
        (x) =>
          `#${x.seq} learner ${x.learnerId} recv ${at(x.receivedAt)} counted ${at(x.countedAt)} answered ${at(x.respondedAt)}`,
      );
    return `\n    429: #${r.seq} learner ${r.learnerId} token ${r.tokenLabel} received ${at(r.receivedAt)} s; that token's last counted calls: ${before.join('; ') || 'none'}`;
  });
  if (refused.length > 0) out.push(`the service answered 429 ${refused.length} times${detail.join('')}`);
  for (const v of sim.violations()) out.push(`over the limit: ${JSON.stringify(v)}`);
  return out;
}

export async function judge(
  stage: Stage,
  applied: readonly Applied[],
  outputs: readonly string[],
): Promise<Verdict> {
  // The CLI takes seconds to start: it runs while the outcome store is read.
  const [outcomes, [repair, repairOutput]] = await Promise.all([
    checkOutcomes(stage.h.ctx, stage.h.sim, {
      org: 'acme',
      ids: stage.run.ids,
      allowed: BUCKETS.filter(isFinalBucket),
    }),
    repairFindsNothing(stage),
  ]);
  const verdict: Verdict = { violations: [...outcomes.violations, ...repair], notes: [], outcomes };
  refusals(stage, outcomes, verdict);
  const all = [
    ...outputs,
    ...stage.cli.flatMap((r) => [r.stdout, r.stderr]),
    repairOutput.stdout,
    repairOutput.stderr,
  ];
  verdict.violations.push(...(await tokenLeaks(stage, all)));
  verdict.violations.push(...limitViolations(stage));
  stallHint(stage, applied, verdict);
  return verdict;
}
