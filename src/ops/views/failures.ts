// The failures table, read from the failure indexes (a page costs a few reads whatever their number):
// per bucket without a run, the run's own index with one.
import type { OutcomeStore } from '../../outcomes/store.ts';
import {
  toLearnerOutcome,
  type Bucket,
  type LearnerOutcome,
  type OutcomeRecord,
} from '../../outcomes/record.ts';
import { FAILURE_BUCKETS } from '../../outcomes/record.ts';

export interface FailureFilter {
  orgs: readonly string[];
  /** One failure bucket (outcome code). */
  code?: Bucket | undefined;
  runId?: string | undefined;
  learnerId?: number | undefined;
}

export interface FailurePage {
  total: number;
  offset: number;
  limit: number;
  items: LearnerOutcome[];
}

interface Segment {
  org: string;
  bucket: Bucket;
  size: number;
}

const isFailure = (b: string) => FAILURE_BUCKETS.includes(b as Bucket);

async function segments(store: OutcomeStore, filter: FailureFilter): Promise<Segment[]> {
  const buckets = filter.code ? [filter.code] : FAILURE_BUCKETS;
  const out: Segment[] = [];
  for (const org of filter.orgs) {
    const sizes = await Promise.all(buckets.map((b) => store.bucketSize(org, b)));
    buckets.forEach((bucket, i) => {
      const size = sizes[i] ?? 0;
      if (size > 0) out.push({ org, bucket, size });
    });
  }
  return out;
}

async function byLearner(store: OutcomeStore, filter: FailureFilter, id: number): Promise<LearnerOutcome[]> {
  const found: LearnerOutcome[] = [];
  for (const org of filter.orgs) {
    const r = await store.get(org, id);
    if (!r || !isFailure(r.b)) continue;
    if (filter.code && r.b !== filter.code) continue;
    if (filter.runId && r.r !== filter.runId) continue;
    found.push(toLearnerOutcome(org, id, r));
  }
  return found;
}

/**
 * Reads `ids` of one organization and keeps the records that still match. An index is a snapshot: a
 * learner retried since the ZREVRANGE has moved on, and a run's index keeps the learners that moved to
 * another run (see includes/record.lua); both are left out.
 */
async function load(
  store: OutcomeStore,
  org: string,
  ids: number[],
  keep: (r: OutcomeRecord) => boolean,
): Promise<LearnerOutcome[]> {
  const records = await store.getMany(org, ids);
  const out: LearnerOutcome[] = [];
  ids.forEach((id, i) => {
    const r = records[i];
    if (r && keep(r)) out.push(toLearnerOutcome(org, id, r));
  });
  return out;
}

export async function failurePage(
  store: OutcomeStore,
  filter: FailureFilter,
  offset: number,
  limit: number,
): Promise<FailurePage> {
  if (filter.learnerId !== undefined) {
    const all = await byLearner(store, filter, filter.learnerId);
    return { total: all.length, offset, limit, items: all.slice(offset, offset + limit) };
  }
  if (filter.runId !== undefined) return runPage(store, filter, filter.runId, offset, limit);
  // Plain index paging: jump straight to the slice.
  const segs = await segments(store, filter);
  const total = segs.reduce((s, g) => s + g.size, 0);
  const items: LearnerOutcome[] = [];
  // A page is the index positions [offset, offset + limit): a row left out (see load) leaves its place
  // empty rather than pull in the next one, which the next page shows.
  let skip = offset;
  let taken = 0;
  for (const seg of segs) {
    if (taken >= limit) break;
    if (skip >= seg.size) {
      skip -= seg.size;
      continue;
    }
    const ids = await store.bucketPage(seg.org, seg.bucket, skip, limit - taken);
    skip = 0;
    taken += ids.length;
    items.push(...(await load(store, seg.org, ids, (r) => r.b === seg.bucket)));
  }
  return { total, offset, limit, items };
}

/**
 * One run's failures. `total` comes from the run's counters (as the overview's), which count a learner
 * that moved to another run in its old run too, like the run's index: so `total`, the index and the
 * pages agree, and such a learner is only left out of the rows.
 */
async function runPage(
  store: OutcomeStore,
  filter: FailureFilter,
  runId: string,
  offset: number,
  limit: number,
): Promise<FailurePage> {
  const { code } = filter;
  const buckets = code ? [code] : FAILURE_BUCKETS;
  const counts = await Promise.all(filter.orgs.map((org) => store.runCounts(org, runId)));
  const counted = counts.map((c) => buckets.reduce((s, b) => s + (c[b] ?? 0), 0));
  const total = counted.reduce((s, n) => s + n, 0);
  const keep = (r: OutcomeRecord) => r.r === runId && (code ? r.b === code : isFailure(r.b));
  const items: LearnerOutcome[] = [];
  // Positions as in failurePage: a learner left out leaves its place empty.
  let skip = offset;
  let taken = 0;
  for (const [i, org] of filter.orgs.entries()) {
    if (taken >= limit) break;
    const expected = counted[i] ?? 0;
    if (code) {
      if (skip >= expected) {
        skip -= expected;
        continue;
      }
      const found = await runCodeIds(store, org, runId, code, expected, skip, limit - taken);
      skip -= found.passed;
      taken += found.ids.length;
      items.push(...(await load(store, org, found.ids, keep)));
      continue;
    }
    // Positions are the index's own (its size, not the counters), so pages neither skip nor repeat.
    const size = await store.runFailureSize(org, runId);
    if (skip >= size) {
      skip -= size;
      continue;
    }
    const ids = await store.runFailurePage(org, runId, skip, limit - taken);
    skip = 0;
    taken += ids.length;
    items.push(...(await load(store, org, ids, keep)));
  }
  return { total, offset, limit, items };
}

const SCAN_CHUNK = 1000;

/**
 * The learner ids of one organization in both a run's failure index and a code's index, newest first
 * (both are scored by the time of the outcome), after passing `skip` of them. It walks the smaller of the
 * two in chunks and asks the other for membership (ZMSCORE: no record is read for a learner it passes
 * over), and stops once the page is full or it has met all `expected` learners of the run's counter. So
 * the cost is bounded by the smaller index: a small run in a big organization, or a rare code in a big
 * run, reads little. Only a deep page of a common code in a big run walks far (about 1 ms per chunk).
 */
async function runCodeIds(
  store: OutcomeStore,
  org: string,
  runId: string,
  code: Bucket,
  expected: number,
  skip: number,
  take: number,
): Promise<{ ids: number[]; passed: number }> {
  const [runSize, codeSize] = await Promise.all([
    store.runFailureSize(org, runId),
    store.bucketSize(org, code),
  ]);
  const walkRun = runSize <= codeSize;
  const ids: number[] = [];
  let passed = 0;
  for (let at = 0; ids.length < take && passed + ids.length < expected; at += SCAN_CHUNK) {
    const chunk = walkRun
      ? await store.runFailurePage(org, runId, at, SCAN_CHUNK)
      : await store.bucketPage(org, code, at, SCAN_CHUNK);
    if (chunk.length === 0) break;
    const inOther = walkRun
      ? await store.inBucket(org, code, chunk)
      : await store.inRunFailures(org, runId, chunk);
    chunk.forEach((id, i) => {
      if (!inOther[i] || ids.length >= take) return;
      if (passed < skip) passed++;
      else ids.push(id);
    });
    if (chunk.length < SCAN_CHUNK) break;
  }
  return { ids, passed };
}
