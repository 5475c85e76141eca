// The run filter uses an index: the failures query with a run reads the run's own
// failure index (`{org}:run:<runId>:fail`, kept by the outcome scripts), not the organization's whole
// failure index. Over 20,000 failures of another run in the same organization, a small run's page is
// exact: every row the records say, in order, none left out (the walk that replaced it stopped after
// 20,000 index entries). Each expected page is computed here from the records themselves (HSCAN).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { failurePage, type FailureFilter } from '../../src/ops/views/failures.ts';
import { createKeys } from '../../src/core/keys.ts';
import { FAILURE_BUCKETS, type Bucket } from '../../src/outcomes/record.ts';
import { OutcomeStore } from '../../src/outcomes/store.ts';
import { deletePrefix, newRedis, randomPrefix } from '../helpers/redis.ts';

const redis = newRedis();
const prefix = randomPrefix('runfail');
const keys = createKeys(prefix);
const store = new OutcomeStore(redis, keys);

const A = 'orga';
const B = 'orgb';
const BIG = 'run-big';
const SMALL = 'run-small';
const OTHER = 'run-other';
const MID = 'run-mid';
const MID_COUNT = 1_500;
const BIG_COUNT = 20_500;
/** Of BIG's failures in A, these are forbidden (a code rare in the organization); the rest not-found. */
const BIG_FORBIDDEN = new Set([7, 5_000, 12_345, 20_000, 20_499]);

const HTTP: Partial<Record<Bucket, number>> = { 'not-found': 404, forbidden: 403, 'server-error': 500 };
// Every outcome gets its own time, so "newest first" is one order (no ties for Redis to break).
let clock = 1_760_000_000_000;

async function outcome(org: string, learnerId: number, runId: string, bucket: Bucket): Promise<void> {
  await store.recordAttempt(
    org,
    learnerId,
    runId,
    { bucket, code: bucket, status: HTTP[bucket], durationMs: 1, countsAsAttempt: true },
    ++clock,
  );
}

beforeAll(async () => {
  // SMALL, in both organizations.
  await outcome(A, 1, SMALL, 'not-found');
  await outcome(A, 2, SMALL, 'forbidden');
  await outcome(A, 3, SMALL, 'server-error');
  await outcome(A, 4, SMALL, 'not-found');
  await outcome(B, 1, SMALL, 'server-error');
  await outcome(A, 5, SMALL, 'forbidden');
  await outcome(B, 2, SMALL, 'not-found');
  await outcome(A, 6, SMALL, 'not-found');
  // Not failures of SMALL now: a success, a failure that succeeded later, one retried (re-queued into
  // its run, as retry does) and then transferred, one waiting to retry, and one re-enqueued into OTHER.
  await outcome(A, 10, SMALL, 'transferred');
  await outcome(A, 11, SMALL, 'server-error');
  await outcome(A, 11, SMALL, 'transferred');
  await outcome(A, 12, SMALL, 'not-found');
  await store.markQueued([{ org: A, learnerId: 12, runId: SMALL, source: 'retry', force: true }], ++clock);
  await outcome(A, 12, SMALL, 'transferred');
  await outcome(A, 13, SMALL, 'retrying');
  await outcome(A, 14, SMALL, 'forbidden');
  await store.markQueued(
    [{ org: A, learnerId: 14, runId: OTHER, source: 'reconcile', force: true }],
    ++clock,
  );
  // MID: 1,500 server errors in A (with SMALL's one, the code's index is a little bigger than MID's).
  await Promise.all(Array.from({ length: MID_COUNT }, (_, i) => outcome(A, 50_000 + i, MID, 'server-error')));
  // BIG, after SMALL: 20,500 failures in A, newer than SMALL's (the walk that the run index replaced
  // read the organization's index newest first and stopped before reaching them). Added concurrently
  // (ioredis pipelines them), each at its own time.
  for (let first = 0; first < BIG_COUNT; first += 5000) {
    const ids = Array.from({ length: Math.min(5000, BIG_COUNT - first) }, (_, i) => first + i);
    await Promise.all(
      ids.map((i) => outcome(A, 100_000 + i, BIG, BIG_FORBIDDEN.has(i) ? 'forbidden' : 'not-found')),
    );
  }
}, 120_000);

afterAll(async () => {
  await deletePrefix(redis, prefix);
  await redis.quit();
});

/** What a page must hold, from the records: the run's failures, by organization, newest first. */
async function expected(filter: FailureFilter): Promise<string[]> {
  const out: string[] = [];
  for (const org of filter.orgs) {
    const found: { id: number; t: number }[] = [];
    for await (const [id, r] of store.scan(org)) {
      if (r.r !== filter.runId || !FAILURE_BUCKETS.includes(r.b as Bucket)) continue;
      if (filter.code && r.b !== filter.code) continue;
      found.push({ id, t: r.t });
    }
    found.sort((x, y) => y.t - x.t);
    out.push(...found.map((f) => `${org}:${f.id}`));
  }
  return out;
}

async function page(filter: FailureFilter, offset: number, limit: number) {
  const p = await failurePage(store, filter, offset, limit);
  return { ...p, rows: p.items.map((l) => `${l.org}:${l.learnerId}`) };
}

describe('the run filter reads the run’s own failure index', () => {
  it('a small run among 20,500 failures of another run: exactly its failures, newest first per organization', async () => {
    expect(await store.bucketSize(A, 'not-found')).toBeGreaterThan(20_000);
    const filter = { orgs: [A, B], runId: SMALL };
    const p = await page(filter, 0, 50);
    expect(p.rows).toEqual(['orga:6', 'orga:5', 'orga:4', 'orga:3', 'orga:2', 'orga:1', 'orgb:2', 'orgb:1']);
    expect(p.rows).toEqual(await expected(filter));
    expect(p.items.every((l) => l.runId === SMALL)).toBe(true);
    expect(p.items.find((l) => l.learnerId === 3 && l.org === A)).toMatchObject({
      state: 'server-error',
      httpStatus: 500,
    });
    // The run's counters (the total) still count learner 14, re-enqueued into OTHER, as the overview does.
    expect(p.total).toBe(9);
    expect(Object.keys(p)).not.toContain('partial');
  });

  it('with a code: a code of the small run, and a code rare in the organization within the big run', async () => {
    for (const filter of [
      { orgs: [A, B], runId: SMALL, code: 'not-found' as const },
      { orgs: [A, B], runId: SMALL, code: 'forbidden' as const },
      { orgs: [A], runId: BIG, code: 'forbidden' as const },
    ]) {
      const want = await expected(filter);
      expect(want.length, JSON.stringify(filter)).toBeGreaterThan(0);
      expect((await page(filter, 0, 50)).rows, JSON.stringify(filter)).toEqual(want);
    }
    expect((await page({ orgs: [A, B], runId: SMALL, code: 'forbidden' }, 0, 50)).rows).toEqual([
      'orga:5',
      'orga:2',
    ]);
    const rare = await page({ orgs: [A], runId: BIG, code: 'forbidden' }, 0, 50);
    expect(rare.total).toBe(BIG_FORBIDDEN.size);
    expect(rare.rows).toHaveLength(BIG_FORBIDDEN.size);
  });

  it('deep pages of the big run, with and without a code, are the records’ own slices', async () => {
    const all = await expected({ orgs: [A], runId: BIG });
    expect(all).toHaveLength(BIG_COUNT);
    const deep = await page({ orgs: [A], runId: BIG }, 20_400, 200);
    expect(deep.total).toBe(BIG_COUNT);
    expect(deep.rows).toEqual(all.slice(20_400));
    // A code filter past the first chunks (1000 entries each) of either walk: BIG's index is bigger than
    // not-found's, so that one is walked; MID's is smaller than server-error's, so MID's is walked.
    expect(await store.runFailureSize(A, BIG)).toBeGreaterThan(await store.bucketSize(A, 'not-found'));
    expect(await store.runFailureSize(A, MID)).toBeLessThan(await store.bucketSize(A, 'server-error'));
    for (const [filter, offset, total] of [
      [{ orgs: [A], runId: BIG, code: 'not-found' as const }, 2_500, BIG_COUNT - BIG_FORBIDDEN.size],
      [{ orgs: [A], runId: MID, code: 'server-error' as const }, 1_450, MID_COUNT],
    ] as const) {
      const want = await expected(filter);
      const p = await page(filter, offset, 100);
      expect(p.total).toBe(total);
      expect(p.rows, filter.runId).toEqual(want.slice(offset, offset + 100));
      expect(p.rows.length, filter.runId).toBeGreaterThanOrEqual(50);
    }
  });

  it('pages of 3 across both organizations cover the small run once each', async () => {
    for (const code of [undefined, 'not-found' as const]) {
      const filter = { orgs: [A, B], runId: SMALL, code };
      const want = await expected(filter);
      const seen: string[] = [];
      for (let offset = 0; offset < want.length + 3; offset += 3)
        seen.push(...(await page(filter, offset, 3)).rows);
      expect(seen, String(code)).toEqual(want);
    }
  });

  it('a learner moved to another run is left out of its old run’s rows and shown in its new run', async () => {
    expect(await redis.zscore(keys.runFailures(A, SMALL), '14')).not.toBeNull();
    await outcome(A, 14, OTHER, 'server-error');
    expect((await page({ orgs: [A], runId: SMALL }, 0, 50)).rows).not.toContain('orga:14');
    expect((await page({ orgs: [A], runId: OTHER }, 0, 50)).rows).toEqual(['orga:14']);
  });
});
