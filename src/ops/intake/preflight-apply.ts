// plan --check --apply (docs/preflight.md): the checked cohort enqueued, except in-target learners
// (recorded done, no call) and unknown or no-user ones (recorded `held`). Both are written as an attempt
// ends, after the queued mark, so counters stay whole; an existing record is never overridden.
import { basename } from 'node:path';
import type { AppContext } from '../../app/context.ts';
import { newRunId } from '../../outcomes/runs.ts';
import type { Bucket } from '../../outcomes/record.ts';
import type { ProduceCounts } from '../../queue/producer.ts';
import type { CheckClass } from '../../queue/sources/list-check.ts';
import { checkedSource } from '../../queue/job.ts';
import { SENT_CLASSES, type PreflightResult } from './preflight.ts';

export interface ApplySummary {
  runId: string;
  /** The sent classes, through the producer. */
  produced: ProduceCounts;
  /** In-target learners recorded already-in-org without a call. */
  recordedInOrg: number;
  /** Unknown and no-user learners recorded held. */
  held: number;
  /** In-target, unknown or no-user learners left as an earlier record had them. */
  kept: number;
}

const HELD_CLASSES: readonly CheckClass[] = ['unknown', 'no-user'];

/** Why a held learner is held, as its record's message (the failures page and report show it). */
const HELD_MESSAGE: Partial<Record<CheckClass, string>> = {
  unknown: 'unknown: the learner list does not hold this id',
  'no-user': 'no-user: no user attached (the spec: transfers are meant for learners with one)',
};

export async function applyPreflight(
  ctx: AppContext,
  r: PreflightResult,
  options: { csv: string; runId?: string | undefined },
): Promise<ApplySummary> {
  const { org } = r;
  const source = basename(options.csv);
  const runId = options.runId ?? newRunId();
  if (!(await ctx.runs.get(runId))) {
    await ctx.runs.create({ id: runId, kind: 'csv', source: `${source} (checked)`, orgs: [org] });
  }
  const sent = r.learners.filter((l) => SENT_CLASSES.includes(l.cls));
  const produced = await ctx.producer.add(
    // Marked as shown by the list: a 404 for one of them counts toward the error budget (guard-rails.md).
    // Where the list shows each learner now: the organization `report --reverse` would move it back to.
    sent.map((l) => ({
      org,
      learnerId: l.learnerId,
      source: checkedSource(l.source),
      line: l.line,
      previousOrgId: l.organizationId,
    })),
    runId,
  );

  const listSource = `list:${r.snapshot.readAt.toISOString()}`;
  const skipped = r.learners.filter((l) => l.cls === 'in-target' || HELD_CLASSES.includes(l.cls));
  const summary: ApplySummary = { runId, produced, recordedInOrg: 0, held: 0, kept: 0 };
  for (let i = 0; i < skipped.length; i += 1000) {
    const chunk = skipped.slice(i, i + 1000);
    const now = Date.now();
    const marks = await ctx.store.markQueued(
      chunk.map((l) => ({ org, learnerId: l.learnerId, runId, source: listSource, force: false })),
      now,
    );
    // The chunk's finishes at once: one pipelined round trip (ioredis), not one per learner.
    const fresh = chunk.filter((_, j) => marks[j]?.kind === 'new');
    summary.kept += chunk.length - fresh.length;
    await Promise.all(
      fresh.map((l) => {
        const bucket: Bucket = l.cls === 'in-target' ? 'already-in-org' : 'held';
        if (bucket === 'held') summary.held++;
        else summary.recordedInOrg++;
        return ctx.store.finish({
          org,
          learnerId: l.learnerId,
          runId,
          at: now,
          attemptId: `check:${runId}:${l.learnerId}`,
          update: {
            b: bucket,
            c: bucket,
            m:
              bucket === 'held'
                ? HELD_MESSAGE[l.cls]
                : `in the organization on the list read at ${listSource.slice(5)}`,
            d: 0,
            n: 0,
          },
        });
      }),
    );
  }
  return summary;
}

export function formatApply(s: ApplySummary): string {
  const p = s.produced;
  return [
    `applied as run ${s.runId}: ${p.enqueued} enqueued` +
      (p.alreadyQueued ? `, ${p.alreadyQueued} already queued` : '') +
      `; ${s.recordedInOrg} recorded already-in-org from the list (no call)` +
      `; ${s.held} held for a decision (no call: \`retry --status held\` sends them)` +
      (s.kept ? `; ${s.kept} kept as an earlier record had them` : ''),
  ].join('\n');
}
