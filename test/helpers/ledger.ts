// The check every chaos test ends with: from the simulator's request record and the outcome store, every
// learner is in exactly one known state, agrees with what the service did to it, and changed owner at
// most once. Returns the learners per bucket for the test's own assertions.
import { expect } from 'vitest';
import type { AppContext } from '../../src/app.ts';
import { OUTCOME_CODES } from '../../src/outcome-codes.ts';
import { BUCKETS, isFinalBucket, isIndexedBucket, type Bucket } from '../../src/outcomes/record.ts';
import { jobCounts } from '../../src/queue/queues.ts';
import { DEFAULT_ORGANIZATIONS, type Simulator } from '../../src/simulator/index.ts';

export interface LedgerExpectation {
  org: string;
  /** Every learner enqueued for the organization (and no other: the store must hold exactly these). */
  ids: readonly number[];
  /** States a learner may be in; default: the final outcome codes only. */
  allowed?: readonly Bucket[];
  /** The simulator's numeric id of the organization; default from DEFAULT_ORGANIZATIONS. */
  orgId?: number;
  /**
   * Learners whose audit may lack their revoked authorizations: the simulator cut the body (a truncate
   * fault) — those are found from the record on their own — or a test's SIGKILL fell in the instant
   * between the response and its spool write. Default none.
   */
  auditExempt?: readonly number[];
}

export type Tally = Partial<Record<Bucket, number[]>>;

export async function expectLedger(ctx: AppContext, sim: Simulator, exp: LedgerExpectation): Promise<Tally> {
  const { org, ids } = exp;
  const allowed: readonly Bucket[] = exp.allowed ?? OUTCOME_CODES;
  const orgId = exp.orgId ?? DEFAULT_ORGANIZATIONS.find((o) => o.key === org)?.id;
  expect(orgId, `simulator id of '${org}'`).toBeTypeOf('number');
  expect(new Set(ids).size, 'ids are distinct').toBe(ids.length);
  expect(await ctx.store.size(org), `records of '${org}'`).toBe(ids.length);

  const tally: Tally = {};
  const records = await ctx.store.getMany(org, ids);
  // Which indexed buckets each learner appears in: exactly one state means at most one index, its own.
  const indexed = new Map<number, string[]>();
  for (const b of BUCKETS.filter(isIndexedBucket)) {
    for (const m of await ctx.redis.zrange(ctx.keys.outcomeIndex(org, b), 0, -1)) {
      indexed.set(Number(m), [...(indexed.get(Number(m)) ?? []), b]);
    }
  }
  const effects = new Map<number, number>();
  for (const r of sim.record) {
    if (r.effectApplied && r.learnerId !== undefined) {
      effects.set(r.learnerId, (effects.get(r.learnerId) ?? 0) + 1);
      // Nobody moved a learner into this organization that we did not ask for.
      if (r.org === org)
        expect(ids, `learner ${r.learnerId} moved into '${org}' unasked`).toContain(r.learnerId);
    }
  }

  ids.forEach((id, i) => {
    const rec = records[i];
    const where = `learner ${id} of '${org}' (${JSON.stringify(rec)})`;
    expect(rec, where).toBeDefined();
    if (!rec) return;
    const bucket = rec.b as Bucket;
    expect(allowed, where).toContain(bucket);
    (tally[bucket] ??= []).push(id);
    expect(indexed.get(id) ?? [], where).toEqual(isIndexedBucket(bucket) ? [bucket] : []);
    const changes = sim.ownerChanges(id);
    expect(changes, `${where}: owner changes`).toBeLessThanOrEqual(1);
    expect(effects.get(id) ?? 0, `${where}: effects in the record`).toBe(changes);
    const learner = sim.learner(id);
    switch (bucket) {
      case 'transferred':
        expect(changes, where).toBe(1);
        expect(learner?.organizationId, where).toBe(orgId);
        expect(rec.x, where).toBe(sim.transfersOf(id)[0]?.data.transferDetails.transferId);
        break;
      case 'already-in-org':
        expect(learner?.organizationId, where).toBe(orgId);
        break;
      case 'not-found':
        expect(learner, where).toBeUndefined();
        break;
      case 'forbidden':
      case 'invalid-request':
      case 'server-error':
        // The service answered: a 4xx or 500 changes nothing (the simulator applies no effect).
        expect(changes, where).toBe(0);
        break;
      default:
        // network-error, bad-response, queued, retrying: the transfer may or may not have happened.
        break;
    }
  });

  // At most one transfer call in flight per learner, ever.
  const overlaps = sim.overlaps().filter((o) => ids.includes(o.learnerId));
  expect(overlaps, 'transfer calls in flight together for one learner').toEqual([]);

  // Every authorization the service revoked while moving a learner here is in the audit stream, except
  // for learners the tool itself marks a possible repeat (the answer of the call that moved them was
  // lost: a SIGKILL before the spool write, a reset, a timeout).
  const marked = ids.filter((_, i) => records[i]?.pr === 1);
  await expectAuditComplete(ctx, sim, org, ids, [...(exp.auditExempt ?? []), ...marked]);

  // The per-organization counters agree with the records.
  const counts = await ctx.store.orgCounts(org);
  const fromRecords: Record<string, number> = {};
  for (const [b, list] of Object.entries(tally)) fromRecords[b] = list.length;
  const { total: _total, ...byBucket } = counts;
  expect(byBucket, `counters of '${org}'`).toEqual(fromRecords);

  // A learner in a final state has no job left to run; one that waits has exactly one.
  const jobs = await jobCounts(ctx.queues.get(org));
  const pending =
    ids.length -
    Object.entries(tally).reduce((n, [b, l]) => n + (isFinalBucket(b as Bucket) ? l.length : 0), 0);
  expect(jobs.waiting + jobs.active + jobs.delayed + jobs.prioritized, `jobs of '${org}'`).toBe(pending);
  return tally;
}

/**
 * Every revoked authorization of every transfer the simulator performed into `org` for these learners is
 * in the audit stream (its e-mail, in the verbatim body or the parsed result). Bodies the simulator cut
 * are the only exception.
 */
export async function expectAuditComplete(
  ctx: AppContext,
  sim: Simulator,
  org: string,
  ids: readonly number[],
  exempt: readonly number[] = [],
): Promise<{ revoked: number; found: number }> {
  const wanted = new Set(ids);
  const cut = new Set<number>(exempt);
  for (const r of sim.record) {
    if (r.fault === 'truncate' && r.learnerId !== undefined) cut.add(r.learnerId);
  }
  const text = new Map<number, string>();
  for await (const e of ctx.store.audit(org)) {
    if (!wanted.has(e.learnerId)) continue;
    text.set(e.learnerId, `${text.get(e.learnerId) ?? ''}\n${e.raw ?? JSON.stringify(e.result)}`);
  }
  let revoked = 0;
  let found = 0;
  const missing: string[] = [];
  for (const id of ids) {
    if (cut.has(id)) continue;
    for (const t of sim.transfersOf(id)) {
      for (const a of t.data.authorizations.revoked) {
        revoked++;
        if ((text.get(id) ?? '').includes(a.email)) found++;
        else if (missing.length < 10) missing.push(`learner ${id}: ${a.email}`);
      }
    }
  }
  expect(missing, `revoked authorizations missing from the audit of '${org}'`).toEqual([]);
  return { revoked, found };
}
