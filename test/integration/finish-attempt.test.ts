// OutcomeStore.finish (finish-attempt.lua) on a real Redis: the end of one attempt in one atomic step.
// A replay writes nothing twice, the audit entry is deduped by transfer id and kept verbatim, the record
// is never rewritten from a stale copy (merge rules), a repeat after a lost answer is flagged, entries
// written by the previous release are still read, and a finish without an update frees only the permit
// and the lease.
import { afterAll, describe, expect, it } from 'vitest';
import { createKeys } from '../../src/core/keys.ts';
import { TransferBudget } from '../../src/limiter/index.ts';
import type { FinishArgs } from '../../src/outcomes/store.ts';
import { OutcomeStore } from '../../src/outcomes/store.ts';
import { shortAttemptId } from '../../src/outcomes/record.ts';
import type { TransferOutcome } from '../../src/api/outcome.ts';
import type { Logger } from '../../src/core/log.ts';
import { auditEntryOf } from '../../src/worker/audit-entry.ts';
import { deletePrefix, newRedis, randomPrefix } from '../helpers/redis.ts';
import { transferred, type Update } from '../helpers/finish-updates.ts';
import { granted } from '../helpers/limiter.ts';

const redis = newRedis();
const prefix = randomPrefix('finish');
const keys = createKeys(prefix);
const store = new OutcomeStore(redis, keys);
const budget = new TransferBudget(redis, {
  prefix,
  limitPerToken: { max: 1000, windowMs: 60_000 },
  limitPerOrg: { max: 1000, windowMs: 60_000 },
  inflightTtlMs: 30_000,
});
const RUN = 'run-1';
let orgs = 0;
/** Each test works on its own organization: its own records, counters, indexes and audit stream. */
const newOrg = () => `fin${++orgs}`;
let attempts = 0;

afterAll(async () => {
  await deletePrefix(redis, prefix);
  await redis.quit();
});

function transferBody(id: string, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ data: { id, groupsRemoved: [{ id: 3 }], authorizationsRevoked: [], ...extra } });
}

function args(
  org: string,
  learnerId: number,
  update: Update | undefined,
  more: Partial<FinishArgs> = {},
): FinishArgs {
  return {
    org,
    learnerId,
    runId: RUN,
    at: 1_700_000_000_000 + ++attempts,
    attemptId: `att-${attempts}`,
    ...(update ? { update } : {}),
    ...more,
  };
}

const alreadyInOrg = (extra: Partial<Update> = {}): Update => ({
  b: 'already-in-org',
  c: 'already-in-org',
  s: 200,
  d: 9,
  n: 1,
  ok: 1,
  ...extra,
});
const networkError: Update = { b: 'retrying', c: 'network-error', e: 'ECONNRESET', d: 1500, n: 1 };
const serverError = (b: 'retrying' | 'server-error'): Update => ({
  b,
  c: 'server-error',
  s: 500,
  d: 20,
  n: 1,
});

const auditFor = (x: string, raw = transferBody(x)): FinishArgs['audit'] => ({
  key: `t:${x}`,
  transferId: x,
  raw,
  kind: 'transfer',
});

async function queued(org: string, learnerIds: number[]): Promise<void> {
  await store.markQueued(
    learnerIds.map((learnerId) => ({ org, learnerId, runId: RUN, source: 't', force: false })),
  );
}

/** Entries of answers in the stream (the story entries of compacted records are not answers). */
const streamLength = async (org: string) => (await allAudit(org)).length;

async function allAudit(org: string) {
  const out = [];
  for await (const e of store.audit(org)) if (e.kind !== 'record') out.push(e);
  return out;
}

/** A learner's record with its history and audit ids, wherever they are (a final one is compacted). */
const story = async (org: string, learnerId: number) => (await store.getWithStory(org, learnerId))?.record;

describe('finish(): a replay writes nothing twice', () => {
  it('the same FinishArgs twice: one audit entry, one attempt, one history entry, counted once', async () => {
    const org = newOrg();
    await queued(org, [1]);
    expect(await store.runCounts(org, RUN)).toEqual({ queued: 1, total: 1 });
    const a = args(org, 1, transferred('T1'), { audit: auditFor('T1') });

    const first = await store.finish(a);
    expect(first.replayed).toBe(false);
    expect(first.bucket).toBe('transferred');
    expect(first.auditId).toMatch(/^\d+-\d+$/);
    const afterFirst = await store.get(org, 1);

    const second = await store.finish(structuredClone(a));
    expect(second.replayed).toBe(true);
    // The record was compacted (final): its dedupe key is gone, the replay is known by its attempt id.
    expect(second.auditId).toBeUndefined();
    expect(second.bucket).toBe('transferred');

    expect(await streamLength(org)).toBe(1);
    expect(await store.get(org, 1)).toEqual(afterFirst);
    const rec = await story(org, 1);
    expect(rec?.b).toBe('transferred');
    expect(rec?.a).toBe(1);
    expect(rec?.h).toEqual([[a.at, 'transferred', 200, 12]]);
    expect(rec?.au).toEqual([first.auditId]);
    // Compacted: the merged attempt is kept as its short hash (a replay is still known by it).
    expect(rec?.ai).toBeUndefined();
    expect(rec?.ah).toEqual([shortAttemptId(a.attemptId)]);
    expect(rec?.x).toBe('T1');
    expect(await store.runCounts(org, RUN)).toEqual({ transferred: 1, total: 1 });
    expect(await store.orgCounts(org)).toEqual({ transferred: 1 });
  });

  it('a replay settles its permit once', async () => {
    const org = newOrg();
    const p = granted(
      await budget.acquire(org, ['tk'], {
        learnerId: 2,
        holder: 'H2',
        lockKey: '',
        lockToken: '',
        graceMs: 0,
      }),
    );
    const a = args(org, 2, transferred('T2'), {
      audit: auditFor('T2'),
      holder: 'H2',
      permit: {
        tokenId: p.tokenId,
        permitId: p.permitId,
        mode: 'response',
        tokenKeyTtlMs: budget.keyTtls.tokenMs,
        orgKeyTtlMs: budget.keyTtls.orgMs,
      },
    });
    await store.finish(a);
    const score = await redis.zscore(keys.orgLog(org), p.permitId);
    expect(score).not.toBeNull();
    expect(await redis.hget(keys.lease(org), '2')).toBeNull();
    await new Promise((r) => setTimeout(r, 5));
    expect((await store.finish(a)).replayed).toBe(true);
    // The settled permit was not stamped again (a later score would hold the budget longer).
    expect(await redis.zscore(keys.orgLog(org), p.permitId)).toBe(score);
    expect(await redis.zscore(keys.tokenLog(org, p.tokenId), p.permitId)).toBe(score);
    const view = await budget.peek(org, ['tk']);
    expect(view.org.used).toBe(1);
    expect(view.org.inflight).toBe(0);
  });
});

describe('finish(): the audit entry is deduped by its key', () => {
  it('two attempts of one learner with the same transfer id: one stream entry, the record points to it once', async () => {
    const org = newOrg();
    await queued(org, [3]);
    const r1 = await store.finish(args(org, 3, transferred('X'), { audit: auditFor('X') }));
    const r2 = await store.finish(args(org, 3, transferred('X'), { audit: auditFor('X') }));
    expect(r2.replayed).toBe(false);
    // The first compacted the record (final): the transfer's entry is in its story, not written again.
    expect(r2.auditId).toBeUndefined();
    expect(await streamLength(org)).toBe(1);
    const rec = await story(org, 3);
    expect(rec?.au).toEqual([r1.auditId]);
    expect(rec?.a).toBe(2);
    // The learner's dedupe key went with the compaction (Redis holds no per-learner dedupe once final).
    expect(await redis.hget(keys.auditIds(org), 't:X')).toBeNull();
  });

  it('two learners answered with the same audit key while not final: one stream entry, both records point to it', async () => {
    const org = newOrg();
    const cut: Update = { b: 'retrying', c: 'bad-response', s: 200, d: 5, n: 1 };
    const r1 = await store.finish(args(org, 4, cut, { audit: auditFor('Y') }));
    const r2 = await store.finish(args(org, 5, cut, { audit: auditFor('Y') }));
    expect(r1.auditId).toBeDefined();
    expect(r2.auditId).toBe(r1.auditId);
    expect(await streamLength(org)).toBe(1);
    expect((await store.get(org, 4))?.au).toEqual([r1.auditId]);
    expect((await store.get(org, 5))?.au).toEqual([r1.auditId]);
  });

  it('different transfer ids of one learner are two entries, both in the record', async () => {
    const org = newOrg();
    const r1 = await store.finish(args(org, 6, transferred('Z1'), { audit: auditFor('Z1') }));
    const r2 = await store.finish(args(org, 6, transferred('Z2'), { audit: auditFor('Z2') }));
    expect(r2.auditId).not.toBe(r1.auditId);
    expect(await streamLength(org)).toBe(2);
    expect((await story(org, 6))?.au).toEqual([r1.auditId, r2.auditId]);
  });
});

describe('finish(): merge rules', () => {
  it("'transferred' then a stale 'server-error' stays 'transferred' (no failure index, counted once)", async () => {
    const org = newOrg();
    await queued(org, [10]);
    await store.finish(args(org, 10, transferred('T10'), { audit: auditFor('T10') }));
    const r = await store.finish(args(org, 10, serverError('server-error')));
    expect(r.bucket).toBe('transferred');
    const rec = await store.get(org, 10);
    expect(rec?.b).toBe('transferred');
    expect(rec?.x).toBe('T10');
    expect(await store.bucketSize(org, 'server-error')).toBe(0);
    expect(await store.orgCounts(org)).toEqual({ transferred: 1 });
    expect(await store.runCounts(org, RUN)).toEqual({ transferred: 1, total: 1 });
  });

  it("'transferred' then 'already-in-org' stays 'transferred' with its transfer id", async () => {
    const org = newOrg();
    await queued(org, [11]);
    await store.finish(args(org, 11, transferred('T11'), { audit: auditFor('T11') }));
    const r = await store.finish(args(org, 11, alreadyInOrg({ x: 'OTHER' })));
    expect(r.bucket).toBe('transferred');
    expect(r.possibleRepeat).toBe(false);
    const rec = await store.get(org, 11);
    expect(rec?.b).toBe('transferred');
    expect(rec?.x).toBe('T11');
    expect(rec?.pr).toBeUndefined();
    expect(await store.orgCounts(org)).toEqual({ transferred: 1 });
    expect(await store.runCounts(org, RUN)).toEqual({ transferred: 1, total: 1 });
  });

  it("'already-in-org' then the spooled 'transferred' becomes 'transferred' with the new id; counters move", async () => {
    const org = newOrg();
    await queued(org, [12]);
    await store.finish(args(org, 12, alreadyInOrg()));
    expect(await store.orgCounts(org)).toEqual({ 'already-in-org': 1 });
    const r = await store.finish(args(org, 12, transferred('T12'), { audit: auditFor('T12') }));
    expect(r.bucket).toBe('transferred');
    const rec = await store.get(org, 12);
    expect(rec?.b).toBe('transferred');
    expect(rec?.x).toBe('T12');
    expect((await story(org, 12))?.au).toEqual([r.auditId]);
    expect(await store.orgCounts(org)).toEqual({ transferred: 1 });
    expect(await store.runCounts(org, RUN)).toEqual({ transferred: 1, total: 1 });
  });

  it('a failure followed by a success leaves the failure indexes', async () => {
    const org = newOrg();
    await queued(org, [13, 14]);
    await store.finish(args(org, 13, networkError));
    await store.finish(args(org, 14, serverError('server-error')));
    expect(await store.bucketSize(org, 'retrying')).toBe(1);
    expect(await store.bucketSize(org, 'server-error')).toBe(1);
    expect(await store.runCounts(org, RUN)).toEqual({ retrying: 1, 'server-error': 1, total: 2 });

    await store.finish(args(org, 13, transferred('T13'), { audit: auditFor('T13') }));
    await store.finish(args(org, 14, transferred('T14'), { audit: auditFor('T14') }));
    expect(await store.bucketSize(org, 'retrying')).toBe(0);
    expect(await store.bucketSize(org, 'server-error')).toBe(0);
    expect(await store.orgCounts(org)).toEqual({ transferred: 2 });
    expect(await store.runCounts(org, RUN)).toEqual({ transferred: 2, total: 2 });
    expect((await store.get(org, 14))?.a).toBe(2);
  });
});

describe("finish(): the run's failure index", () => {
  const failed = async (org: string, run = RUN) =>
    (await redis.zrange(keys.runFailures(org, run), 0, -1)).map(Number).sort((a, b) => a - b);
  const notFound: Update = { b: 'not-found', c: 'not-found', s: 404, d: 4, n: 1 };

  it('a final failure enters it, scored by its time; a wait in retrying does not; a new failure moves it', async () => {
    const org = newOrg();
    await queued(org, [40, 41]);
    await store.finish(args(org, 40, networkError));
    expect(await failed(org)).toEqual([]);
    const a = args(org, 40, serverError('server-error'));
    await store.finish(a);
    expect(await redis.zscore(keys.runFailures(org, RUN), '40')).toBe(String(a.at));
    await store.finish(args(org, 41, notFound));
    expect(await failed(org)).toEqual([40, 41]);
    // A later failure of the same learner: still there once, at the new time.
    const b = args(org, 40, notFound);
    await store.finish(b);
    expect(await redis.zscore(keys.runFailures(org, RUN), '40')).toBe(String(b.at));
    expect(await failed(org)).toEqual([40, 41]);
  });

  it('a learner retried from a failure to a success leaves it, as its run counters say', async () => {
    const org = newOrg();
    await queued(org, [42, 43, 44]);
    for (const id of [42, 43, 44]) await store.finish(args(org, id, serverError('server-error')));
    expect(await failed(org)).toEqual([42, 43, 44]);
    // 42: retried as retryFailed does it (re-queued into its own run, forced), then transferred.
    await store.markQueued([{ org, learnerId: 42, runId: RUN, source: 'retry', force: true }]);
    expect(await failed(org)).toEqual([43, 44]);
    await store.finish(args(org, 42, transferred('T42'), { audit: auditFor('T42') }));
    // 43: a success recorded after its failure (a spool replay of an answer that came first): it wins.
    await store.finish(args(org, 43, alreadyInOrg()));
    expect(await failed(org)).toEqual([44]);
    expect(await store.runCounts(org, RUN)).toEqual({
      transferred: 1,
      'already-in-org': 1,
      'server-error': 1,
      total: 3,
    });
  });

  it('a learner moved to a new run stays in its old run’s index, as in its counters, and enters the new one', async () => {
    const org = newOrg();
    await queued(org, [45]);
    await store.finish(args(org, 45, notFound));
    await store.markQueued([{ org, learnerId: 45, runId: 'run-2', source: 'reconcile', force: true }]);
    expect(await failed(org, RUN)).toEqual([45]);
    expect(await store.runCounts(org, RUN)).toEqual({ 'not-found': 1, total: 1 });
    expect(await failed(org, 'run-2')).toEqual([]);
    await store.finish({ ...args(org, 45, serverError('server-error')), runId: 'run-2' });
    expect(await failed(org, 'run-2')).toEqual([45]);
    expect(await failed(org, RUN)).toEqual([45]);
  });

  it("a success kept in its run against a late failure of another run's job enters no index", async () => {
    const org = newOrg();
    await queued(org, [46]);
    await store.finish(args(org, 46, transferred('T46'), { audit: auditFor('T46') }));
    const r = await store.finish({ ...args(org, 46, serverError('server-error')), runId: 'run-3' });
    expect(r.bucket).toBe('transferred');
    expect(await failed(org, 'run-3')).toEqual([]);
    expect(await failed(org, RUN)).toEqual([]);
  });
});

describe('finish(): a possible repeat', () => {
  it("'already-in-org' after a 'network-error' is flagged in the record and the audit entry", async () => {
    const org = newOrg();
    await queued(org, [20]);
    await store.finish(args(org, 20, networkError));
    const r = await store.finish(
      args(org, 20, alreadyInOrg(), {
        audit: {
          key: 's:entry-20',
          transferId: '',
          raw: JSON.stringify({ data: { repeat: true } }),
          kind: 'transfer',
        },
      }),
    );
    expect(r.possibleRepeat).toBe(true);
    expect(r.bucket).toBe('already-in-org');
    expect((await store.get(org, 20))?.pr).toBe(1);
    const [entry] = await store.auditEntries(org, [r.auditId as string]);
    expect(entry?.possibleRepeat).toBe(true);
    expect(entry?.learnerId).toBe(20);

    // The transfer's own answer, replayed from a spool, clears the flag.
    const t = await store.finish(args(org, 20, transferred('T20'), { audit: auditFor('T20') }));
    expect(t.possibleRepeat).toBe(false);
    const rec = await store.get(org, 20);
    expect(rec?.b).toBe('transferred');
    expect(rec?.pr).toBeUndefined();
    expect(rec?.x).toBe('T20');
  });

  it("'already-in-org' after a 'bad-response' is flagged too", async () => {
    const org = newOrg();
    await store.finish(args(org, 21, { b: 'retrying', c: 'bad-response', s: 200, d: 5, n: 1 }));
    const r = await store.finish(args(org, 21, alreadyInOrg()));
    expect(r.possibleRepeat).toBe(true);
    expect((await store.get(org, 21))?.pr).toBe(1);
  });

  it("'already-in-org' with a lost lease (update.lost) is flagged, with or without a record", async () => {
    const org = newOrg();
    await queued(org, [22]);
    const r = await store.finish(args(org, 22, alreadyInOrg({ lost: 1 })));
    expect(r.possibleRepeat).toBe(true);
    expect((await store.get(org, 22))?.pr).toBe(1);
    const none = await store.finish(args(org, 23, alreadyInOrg({ lost: 1 })));
    expect(none.possibleRepeat).toBe(true);
    expect((await store.get(org, 23))?.pr).toBe(1);

    const t = await store.finish(args(org, 22, transferred('T22'), { audit: auditFor('T22') }));
    expect(t.possibleRepeat).toBe(false);
    expect((await store.get(org, 22))?.pr).toBeUndefined();
  });

  it('a lost lease answered by something else (a 429) still flags the repeat a later attempt gets', async () => {
    const org = newOrg();
    await queued(org, [28]);
    // The attempt that took the lease over was answered 429: the dead holder's call is still unknown.
    const wait: Update = { b: 'retrying', c: 'rate-limited', s: 429, d: 5, n: 0, lost: 1 };
    expect((await store.finish(args(org, 28, wait))).possibleRepeat).toBe(false);
    const r = await store.finish(args(org, 28, alreadyInOrg({ s: 400, lost: 0 })));
    expect(r.possibleRepeat).toBe(true);
    expect((await store.get(org, 28))?.pr).toBe(1);
    const [entry] = (await allAudit(org)).filter((e) => e.learnerId === 28);
    expect(entry?.kind).toBe('possible-repeat');
    expect(entry?.repeatCauses).toEqual(['lost-lease']);
  });

  it('no flag after an answered failure, after a known transfer, or without lost', async () => {
    const org = newOrg();
    await queued(org, [24, 25, 26]);
    // A 500 was an answer: nothing is unknown.
    await store.finish(args(org, 24, serverError('retrying')));
    const a = await store.finish(
      args(org, 24, alreadyInOrg(), {
        audit: { key: 's:entry-24', transferId: '', raw: '{"data":{}}', kind: 'transfer' },
      }),
    );
    expect(a.possibleRepeat).toBe(false);
    expect((await store.get(org, 24))?.pr).toBeUndefined();
    expect((await store.auditEntries(org, [a.auditId as string]))[0]?.possibleRepeat).toBe(false);
    // The learner's transfer is on record: the repeat is the expected one.
    await store.finish(args(org, 25, networkError));
    await store.finish(args(org, 25, transferred('T25'), { audit: auditFor('T25') }));
    expect((await store.finish(args(org, 25, alreadyInOrg()))).possibleRepeat).toBe(false);
    expect((await store.get(org, 25))?.pr).toBeUndefined();
    // A queued learner answered 'already-in-org' with its lease never lost.
    expect((await store.finish(args(org, 26, alreadyInOrg({ lost: 0 })))).possibleRepeat).toBe(false);
    // No flag, no entry: nothing is unknown about 24's or 26's transfers.
    expect((await allAudit(org)).filter((e) => e.possibleRepeat || e.kind === 'possible-repeat')).toEqual([]);
  });

  it('the flag keeps its causes; a repeat answered by the 400 gets an entry of its own, written once', async () => {
    const org = newOrg();
    await queued(org, [27, 28]);
    await store.finish(args(org, 27, networkError));
    await store.finish(args(org, 27, { b: 'retrying', c: 'bad-response', s: 200, d: 5, n: 1 }));
    // A 200 repeat: its own body is the entry, flagged with every cause, in order.
    const r = await store.finish(
      args(org, 27, alreadyInOrg({ lost: 1 }), {
        audit: { key: 's:entry-27', transferId: '', raw: '{"data":{}}', kind: 'transfer' },
      }),
    );
    const [entry] = await store.auditEntries(org, [r.auditId as string]);
    expect(entry).toMatchObject({
      kind: 'transfer',
      possibleRepeat: true,
      repeatCauses: ['lost-lease', 'no-answer', 'unreadable-answer'],
    });

    // The 400 "already associated" brings no body: an entry of kind 'possible-repeat', linked from the
    // record, once however often the same attempt is written (a retried finish).
    await store.finish(args(org, 28, networkError));
    const four = args(org, 28, alreadyInOrg({ s: 400 }));
    const a = await store.finish(four);
    expect(a.possibleRepeat).toBe(true);
    const again = await store.finish(four);
    expect(again.replayed).toBe(true);
    expect(again.auditId).toBeUndefined();
    expect((await allAudit(org)).filter((e) => e.learnerId === 28)).toEqual([
      {
        id: a.auditId,
        learnerId: 28,
        runId: RUN,
        transferId: '',
        result: null,
        raw: undefined,
        kind: 'possible-repeat',
        possibleRepeat: true,
        repeatCauses: ['no-answer'],
      },
    ]);
    expect((await story(org, 28))?.au).toEqual([a.auditId]);
  });
});

describe('audit entries: verbatim, and as the previous release wrote them', () => {
  it('the body is kept byte for byte and result is its parsed data', async () => {
    const org = newOrg();
    const raw =
      '{"data":{"id":"T30","groupsRemoved":[{"id":1,"name":"Grüße ✓"}],"futureField":{"nested":[1,2.50,null]}},' +
      '  "meta":{"unknown":true,"requestId":"abc"} ,"z":1e3}';
    const r = await store.finish(args(org, 30, transferred('T30'), { audit: auditFor('T30', raw) }));
    const [entry] = await store.auditEntries(org, [r.auditId as string]);
    expect(entry?.raw).toBe(raw);
    expect(Buffer.from(entry?.raw ?? '').equals(Buffer.from(raw))).toBe(true);
    expect(entry?.result).toEqual({
      id: 'T30',
      groupsRemoved: [{ id: 1, name: 'Grüße ✓' }],
      futureField: { nested: [1, 2.5, null] },
    });
    expect(entry).toMatchObject({
      id: r.auditId,
      learnerId: 30,
      runId: RUN,
      transferId: 'T30',
      kind: 'transfer',
    });
    expect(entry?.possibleRepeat).toBe(false);
    // The iterator reads the same entry.
    expect(await allAudit(org)).toEqual([entry]);
  });

  it("kind 'unreadable' gives { unreadable, reason, body }, even for a body that parses", async () => {
    const org = newOrg();
    const r1 = await store.finish(
      args(
        org,
        31,
        { b: 'retrying', c: 'bad-response', s: 200, d: 3, n: 1 },
        {
          audit: {
            key: 's:e31',
            transferId: '',
            raw: '<html>502 Bad Gateway</html>',
            kind: 'unreadable',
            reason: 'not JSON',
          },
        },
      ),
    );
    const r2 = await store.finish(
      args(
        org,
        32,
        { b: 'retrying', c: 'bad-response', s: 200, d: 3, n: 1 },
        {
          audit: {
            key: 's:e32',
            transferId: '',
            raw: '{"data":{"weird":1}}',
            kind: 'unreadable',
            reason: 'schema',
          },
        },
      ),
    );
    const [e1, e2] = await store.auditEntries(org, [r1.auditId as string, r2.auditId as string]);
    expect(e1?.kind).toBe('unreadable');
    expect(e1?.raw).toBe('<html>502 Bad Gateway</html>');
    expect(e1?.result).toEqual({
      unreadable: true,
      reason: 'not JSON',
      body: '<html>502 Bad Gateway</html>',
    });
    expect(e2?.kind).toBe('unreadable');
    expect(e2?.result).toEqual({ unreadable: true, reason: 'schema', body: '{"data":{"weird":1}}' });
  });

  it('an entry written the old way (result = JSON of data, no raw/kind) is still read', async () => {
    const org = newOrg();
    const data = { id: 'T40', groupsRemoved: [{ id: 9 }], authorizationsRevoked: [{ id: 'a1' }] };
    const oldId = await redis.xadd(
      keys.audit(org),
      '*',
      'learnerId',
      '40',
      'runId',
      'old-run',
      'transferId',
      'T40',
      'result',
      JSON.stringify(data),
    );
    const unreadable = { unreadable: true, reason: 'not JSON', body: 'oops' };
    const oldBad = await redis.xadd(
      keys.audit(org),
      '*',
      'learnerId',
      '41',
      'runId',
      'old-run',
      'transferId',
      '',
      'result',
      JSON.stringify(unreadable),
    );
    const expected = {
      id: oldId,
      learnerId: 40,
      runId: 'old-run',
      transferId: 'T40',
      result: data,
      raw: undefined,
      kind: 'transfer',
      possibleRepeat: false,
    };
    const listed = await allAudit(org);
    expect(listed).toHaveLength(2);
    expect(listed[0]).toEqual(expected);
    expect(listed[1]).toMatchObject({ id: oldBad, learnerId: 41, result: unreadable, kind: 'unreadable' });
    expect(listed[1]?.raw).toBeUndefined();
    expect(await store.auditEntries(org, [oldId as string])).toEqual([expected]);
  });
});

describe('finish() without an update', () => {
  it('frees the permit and the lease and leaves the record untouched', async () => {
    const org = newOrg();
    await queued(org, [50]);
    const before = await redis.hget(keys.outcomes(org), '50');
    const countsBefore = await store.runCounts(org, RUN);
    const p = granted(
      await budget.acquire(org, ['tk'], {
        learnerId: 50,
        holder: 'H50',
        lockKey: '',
        lockToken: '',
        graceMs: 0,
      }),
    );
    expect(await redis.hget(keys.lease(org), '50')).not.toBeNull();
    const r = await store.finish(
      args(org, 50, undefined, {
        holder: 'H50',
        permit: {
          tokenId: p.tokenId,
          permitId: p.permitId,
          mode: 'release',
          tokenKeyTtlMs: budget.keyTtls.tokenMs,
          orgKeyTtlMs: budget.keyTtls.orgMs,
        },
      }),
    );
    expect(r.bucket).toBe('queued');
    expect(r.auditId).toBeUndefined();
    expect(await redis.hget(keys.lease(org), '50')).toBeNull();
    const view = await budget.peek(org, ['tk']);
    expect(view.org.inflight).toBe(0);
    expect(view.org.used).toBe(0); // released: never sent
    expect(await redis.hget(keys.outcomes(org), '50')).toBe(before);
    expect(await store.runCounts(org, RUN)).toEqual(countsBefore);
    expect(await streamLength(org)).toBe(0);
  });

  it('with a response permit, it is stamped into the log; a learner without a record gets none', async () => {
    const org = newOrg();
    const p = granted(
      await budget.acquire(org, ['tk'], {
        learnerId: 51,
        holder: 'H51',
        lockKey: '',
        lockToken: '',
        graceMs: 0,
      }),
    );
    await store.finish(
      args(org, 51, undefined, {
        holder: 'H51',
        permit: {
          tokenId: p.tokenId,
          permitId: p.permitId,
          mode: 'response',
          tokenKeyTtlMs: budget.keyTtls.tokenMs,
          orgKeyTtlMs: budget.keyTtls.orgMs,
        },
      }),
    );
    expect(await redis.hget(keys.lease(org), '51')).toBeNull();
    const view = await budget.peek(org, ['tk']);
    expect(view.org.inflight).toBe(0);
    expect(view.org.used).toBe(1);
    expect(await store.get(org, 51)).toBeUndefined();
    expect(await redis.exists(keys.outcomes(org))).toBe(0);
    expect(await store.orgCounts(org)).toEqual({});
  });
});

describe("finish(): a repeat's answer and the transfer's own", () => {
  it('both kept when the repeat is recorded first (a worker frozen past its lease records its answer late)', async () => {
    const org = newOrg();
    await queued(org, [40]);
    const deps = { scrub: (s: string) => s, logger: {} as Logger };
    const ids = (attemptId: string) => ({ attemptId, transferId: 'T-40', org, learnerId: 40 });
    // The service names the transfer that moved the learner in a repeat's answer, with nothing revoked.
    const repeatRaw = transferBody('T-40', {
      message: 'Learner is already associated with the organization',
    });
    const ownRaw = transferBody('T-40', { authorizationsRevoked: [{ email: 'parent@example.test' }] });
    const repeat = { code: 'already-in-org', status: 200, via: 'repeat-success', raw: repeatRaw };
    const own = { code: 'transferred', status: 200, raw: ownRaw };
    // The attempt that took the lease over gets the repeat; the frozen holder's answer comes after.
    const first = args(org, 40, alreadyInOrg({ lost: 1 }));
    first.audit = await auditEntryOf(repeat as unknown as TransferOutcome, ids(first.attemptId), deps);
    await store.finish(first);
    const late = args(org, 40, transferred('T-40'));
    late.audit = await auditEntryOf(own as unknown as TransferOutcome, ids(late.attemptId), deps);
    await store.finish(late);
    const raws = (await allAudit(org)).filter((e) => e.learnerId === 40).map((e) => e.raw);
    expect(raws).toContain(ownRaw);
    expect(raws).toContain(repeatRaw);
    expect((await store.get(org, 40))?.b).toBe('transferred');
  });
});
