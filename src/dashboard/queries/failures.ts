// The failures table: learners in a failure bucket, read from the per-bucket sorted-set indexes, so a
// page costs a few ZCARDs, one ZREVRANGE and one HMGET per organization whatever the number of failures.
// Order: organization, then outcome code, then newest first (failures grouped by reason).
import type { OutcomeStore } from '../../outcomes/store.ts';
import { toLearnerOutcome, type Bucket, type LearnerOutcome } from '../../outcomes/record.ts';
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
  /**
   * Set when a run filter stopped after RUN_SCAN_LIMIT index entries: the page may hold fewer items
   * than the run has at this offset (narrow it with code or org).
   */
  partial?: true;
}

interface Segment {
  org: string;
  bucket: Bucket;
  size: number;
}

const SCAN_CHUNK = 1000;
/**
 * The failure index is per organization and bucket, not per run: a run filter walks it and keeps the
 * run's learners. One request reads at most this many index entries (a few tens of ms), whatever the
 * number of failures; past it the page is marked partial.
 */
export const RUN_SCAN_LIMIT = 20_000;

async function segments(store: OutcomeStore, filter: FailureFilter): Promise<Segment[]> {
  const buckets = filter.code ? [filter.code] : FAILURE_BUCKETS;
  const out: Segment[] = [];
  for (const org of filter.orgs) {
    // With a run, its counters give the size (the index is per organization, not per run).
    const runCounts = filter.runId ? await store.runCounts(org, filter.runId) : undefined;
    const sizes = await Promise.all(
      buckets.map((b) => (runCounts ? Promise.resolve(runCounts[b] ?? 0) : store.bucketSize(org, b))),
    );
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
    if (!r || !FAILURE_BUCKETS.includes(r.b as Bucket)) continue;
    if (filter.code && r.b !== filter.code) continue;
    if (filter.runId && r.r !== filter.runId) continue;
    found.push(toLearnerOutcome(org, id, r));
  }
  return found;
}

/** Reads `ids` of one organization and keeps the records still in `bucket` (and the run, if any). */
async function load(
  store: OutcomeStore,
  org: string,
  bucket: Bucket,
  ids: number[],
  runId: string | undefined,
): Promise<LearnerOutcome[]> {
  const records = await store.getMany(org, ids);
  const out: LearnerOutcome[] = [];
  ids.forEach((id, i) => {
    const r = records[i];
    // The index is a snapshot: a learner retried since the ZREVRANGE has moved on; leave it out.
    if (r && r.b === bucket && (!runId || r.r === runId)) out.push(toLearnerOutcome(org, id, r));
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
  const segs = await segments(store, filter);
  const total = segs.reduce((s, g) => s + g.size, 0);
  const items: LearnerOutcome[] = [];
  let skip = offset;
  let scanned = 0;
  let partial = false;
  for (const seg of segs) {
    if (partial) break;
    if (items.length >= limit) break;
    if (!filter.runId) {
      // Plain index paging: jump straight to the slice.
      if (skip >= seg.size) {
        skip -= seg.size;
        continue;
      }
      const ids = await store.bucketPage(seg.org, seg.bucket, skip, limit - items.length);
      skip = 0;
      items.push(...(await load(store, seg.org, seg.bucket, ids, undefined)));
      continue;
    }
    // With a run: walk the index in chunks and keep that run's learners (the run's counters said how many).
    if (skip >= seg.size) {
      skip -= seg.size;
      continue;
    }
    for (let at = 0; items.length < limit; at += SCAN_CHUNK) {
      if (scanned >= RUN_SCAN_LIMIT) {
        partial = true;
        break;
      }
      const ids = await store.bucketPage(seg.org, seg.bucket, at, SCAN_CHUNK);
      scanned += ids.length;
      if (ids.length === 0) break;
      const matched = await load(store, seg.org, seg.bucket, ids, filter.runId);
      const dropped = Math.min(skip, matched.length);
      skip -= dropped;
      items.push(...matched.slice(dropped, dropped + limit - items.length));
      if (ids.length < SCAN_CHUNK) break;
    }
  }
  return partial ? { total, offset, limit, items, partial: true } : { total, offset, limit, items };
}
