// The outcome store check as data: from the simulator's request record and the outcome store, every learner is in
// exactly one known state, agrees with what the service did to it, changed owner at most once, had at most
// one call in flight, and every revoked authorization is in the audit stream. Returns the violations as
// sentences instead of asserting, so that vitest (outcomes-check.ts's expectOutcomes) and the standalone seeded
// fault runner (test/faults/) share one set of rules. No vitest import here: the runner runs without it.
import type { AppContext } from '../../src/app/context.ts';
import { OUTCOME_CODES } from '../../src/outcomes/codes.ts';
import { BUCKETS, isFinalBucket, isIndexedBucket, type Bucket } from '../../src/outcomes/record.ts';
import type { OutcomeRecord } from '../../src/outcomes/record.ts';
import { jobCounts } from '../../src/queue/queues.ts';
import { DEFAULT_ORGANIZATIONS, type Simulator } from '../../src/simulator/index.ts';

export interface OutcomeExpectation {
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

export interface OutcomeFindings {
  violations: string[];
  tally: Tally;
  /** Each learner's record, in the order of `ids`. */
  records: (OutcomeRecord | undefined)[];
  /** Learners the tool marked a possible repeat (pr = 1). */
  marked: number[];
  audit: AuditFindings;
}

export interface AuditFindings {
  revoked: number;
  found: number;
  /** The first few missing authorizations, as 'learner ID: EMAIL'. */
  missing: string[];
}

/** The learners of each indexed bucket's sorted set: exactly one state means at most one index, its own. */
async function indexesOf(ctx: AppContext, org: string): Promise<Map<number, string[]>> {
  const indexed = new Map<number, string[]>();
  for (const b of BUCKETS.filter(isIndexedBucket)) {
    for (const m of await ctx.redis.zrange(ctx.keys.outcomeIndex(org, b), 0, -1)) {
      indexed.set(Number(m), [...(indexed.get(Number(m)) ?? []), b]);
    }
  }
  return indexed;
}

/** What one learner's record says against what the simulator did to it. */
function learnerViolations(
  sim: Simulator,
  id: number,
  rec: OutcomeRecord | undefined,
  where: string,
  ctx: { allowed: readonly Bucket[]; orgId: number; effects: number; indexed: string[] },
): string[] {
  if (!rec) return [`${where}: no record`];
  const out: string[] = [];
  const bucket = rec.b as Bucket;
  if (!ctx.allowed.includes(bucket)) out.push(`${where}: state '${bucket}' is not allowed here`);
  const wantIndex = isIndexedBucket(bucket) ? [bucket] : [];
  if (ctx.indexed.join(',') !== wantIndex.join(','))
    out.push(`${where}: in indexes [${ctx.indexed.join(', ')}], expected [${wantIndex.join(', ')}]`);
  const changes = sim.ownerChanges(id);
  if (changes > 1) out.push(`${where}: changed owner ${changes} times`);
  if (ctx.effects !== changes)
    out.push(`${where}: ${ctx.effects} effects in the request record, ${changes} owner changes`);
  const learner = sim.learner(id);
  switch (bucket) {
    case 'transferred':
      if (changes !== 1) out.push(`${where}: transferred, but the service moved it ${changes} times`);
      if (learner?.organizationId !== ctx.orgId) out.push(`${where}: transferred, but not in the org`);
      if (rec.x !== sim.transfersOf(id)[0]?.data.transferDetails.transferId)
        out.push(`${where}: transfer id differs from the service's`);
      break;
    case 'already-in-org':
      if (learner?.organizationId !== ctx.orgId) out.push(`${where}: already-in-org, but not in the org`);
      break;
    case 'not-found':
      if (learner !== undefined) out.push(`${where}: not-found, but the service knows it`);
      break;
    case 'forbidden':
    case 'invalid-request':
    case 'server-error':
      // The service answered: a 4xx or 500 changes nothing (the simulator applies no effect).
      if (changes !== 0) out.push(`${where}: '${bucket}', but the service moved it`);
      break;
    default:
      // network-error, bad-response, queued, retrying: the transfer may or may not have happened.
      break;
  }
  return out;
}

/** Effects per learner in the request record, and a violation for every learner moved into `org` unasked. */
function effectsOf(sim: Simulator, org: string, ids: readonly number[]): [Map<number, number>, string[]] {
  const wanted = new Set(ids);
  const effects = new Map<number, number>();
  const unasked: string[] = [];
  for (const r of sim.record) {
    if (!r.effectApplied || r.learnerId === undefined) continue;
    effects.set(r.learnerId, (effects.get(r.learnerId) ?? 0) + 1);
    if (r.org === org && !wanted.has(r.learnerId))
      unasked.push(`learner ${r.learnerId} moved into '${org}' unasked`);
  }
  return [effects, unasked];
}

export async function checkOutcomes(
  ctx: AppContext,
  sim: Simulator,
  exp: OutcomeExpectation,
): Promise<OutcomeFindings> {
  const { org, ids } = exp;
  const allowed: readonly Bucket[] = exp.allowed ?? OUTCOME_CODES;
  const orgId = exp.orgId ?? DEFAULT_ORGANIZATIONS.find((o) => o.key === org)?.id;
  const tally: Tally = {};
  const empty = { revoked: 0, found: 0, missing: [] };
  if (orgId === undefined)
    return { violations: [`no simulator id for '${org}'`], tally, records: [], marked: [], audit: empty };
  const violations: string[] = [];
  if (new Set(ids).size !== ids.length) violations.push('the ids are not distinct');
  const size = await ctx.store.size(org);
  if (size !== ids.length) violations.push(`'${org}' holds ${size} records, expected ${ids.length}`);

  const records = await ctx.store.getMany(org, ids);
  const indexed = await indexesOf(ctx, org);
  const [effects, unasked] = effectsOf(sim, org, ids);
  violations.push(...unasked);
  ids.forEach((id, i) => {
    const rec = records[i];
    if (rec) (tally[rec.b as Bucket] ??= []).push(id);
    const where = `learner ${id} of '${org}' (${JSON.stringify(rec)})`;
    const found = learnerViolations(sim, id, rec, where, {
      allowed,
      orgId,
      effects: effects.get(id) ?? 0,
      indexed: indexed.get(id) ?? [],
    });
    violations.push(...found);
  });

  // At most one transfer call in flight per learner, ever.
  const wanted = new Set(ids);
  for (const o of sim.overlaps().filter((x) => wanted.has(x.learnerId)))
    violations.push(`learner ${o.learnerId}: calls ${o.first} and ${o.second} were in flight together`);

  // Every authorization the service revoked while moving a learner here is in the audit stream, except
  // for learners the tool itself marks a possible repeat (the answer of the call that moved them was
  // lost: a SIGKILL before the spool write, a reset, a timeout).
  const marked = ids.filter((_, i) => records[i]?.pr === 1);
  const audit = await auditGaps(ctx, sim, org, ids, [...(exp.auditExempt ?? []), ...marked]);
  for (const m of audit.missing) violations.push(`revoked authorization missing from the audit: ${m}`);

  violations.push(...(await counterViolations(ctx, org, ids, tally)));
  return { violations, tally, records, marked, audit };
}

/** The per-organization counters agree with the records; a learner in a final state has no job left. */
async function counterViolations(
  ctx: AppContext,
  org: string,
  ids: readonly number[],
  tally: Tally,
): Promise<string[]> {
  const out: string[] = [];
  const { total: _total, ...byBucket } = await ctx.store.orgCounts(org);
  const fromRecords: Record<string, number> = {};
  for (const [b, list] of Object.entries(tally)) fromRecords[b] = list.length;
  const sorted = (o: Record<string, number>) => JSON.stringify(Object.entries(o).sort());
  if (sorted(byBucket) !== sorted(fromRecords))
    out.push(
      `counters of '${org}' ${JSON.stringify(byBucket)} differ from the records ${sorted(fromRecords)}`,
    );
  const jobs = await jobCounts(ctx.queues.get(org));
  const final = Object.entries(tally).reduce(
    (n, [b, l]) => n + (isFinalBucket(b as Bucket) ? l.length : 0),
    0,
  );
  const left = jobs.waiting + jobs.active + jobs.delayed + jobs.prioritized;
  if (left !== ids.length - final)
    out.push(`'${org}' has ${left} jobs left for ${ids.length - final} learners not in a final state`);
  return out;
}

/**
 * Every revoked authorization of every transfer the simulator performed into `org` for these learners,
 * and whether it is in the audit stream (its e-mail, in the verbatim body or the parsed result). Bodies
 * the simulator cut and the `exempt` learners are skipped.
 */
export async function auditGaps(
  ctx: AppContext,
  sim: Simulator,
  org: string,
  ids: readonly number[],
  exempt: readonly number[] = [],
): Promise<AuditFindings> {
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
  const findings: AuditFindings = { revoked: 0, found: 0, missing: [] };
  for (const id of ids) {
    if (cut.has(id)) continue;
    for (const t of sim.transfersOf(id)) {
      for (const a of t.data.authorizations.revoked) {
        findings.revoked++;
        if ((text.get(id) ?? '').includes(a.email)) findings.found++;
        else if (findings.missing.length < 10) findings.missing.push(`learner ${id}: ${a.email}`);
      }
    }
  }
  return findings;
}
