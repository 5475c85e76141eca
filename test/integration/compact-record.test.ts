// A final record is compacted (finish-attempt.lua, includes/compact.lua): small in Redis, its story
// (history, audit ids) in the audit stream, and every guarantee of the outcome store kept: a spool replay of an
// attempt merged before the compaction merges nothing, and a learner re-opened by a retry keeps what its
// compacted history said of lost answers (a later repeat is still flagged a possible repeat).
import { afterAll, describe, expect, it } from 'vitest';
import { createKeys } from '../../src/core/keys.ts';
import { decodeRecord, shortAttemptId } from '../../src/outcomes/record.ts';
import { OutcomeStore, type FinishArgs } from '../../src/outcomes/store.ts';
import { deletePrefix, newRedis, randomPrefix } from '../helpers/redis.ts';
import { transferred, type Update } from '../helpers/finish-updates.ts';

const redis = newRedis();
const prefix = randomPrefix('compact');
const keys = createKeys(prefix);
const store = new OutcomeStore(redis, keys);
const RUN = '20261126T090000-aaaa';
let n = 0;
let orgs = 0;
const newOrg = () => `cmp${++orgs}`;

afterAll(async () => {
  await deletePrefix(redis, prefix);
  await redis.quit();
});

const networkError: Update = { b: 'retrying', c: 'network-error', e: 'ECONNRESET', d: 1500, n: 1 };
const forbidden: Update = {
  b: 'forbidden',
  c: 'forbidden',
  s: 403,
  e: 'Forbidden',
  m: 'not yours',
  d: 8,
  n: 1,
};
const repeat400: Update = { b: 'already-in-org', c: 'already-in-org', s: 400, d: 9, n: 1 };

function attempt(org: string, learnerId: number, update: Update, more: Partial<FinishArgs> = {}): FinishArgs {
  n++;
  return {
    org,
    learnerId,
    runId: RUN,
    at: 1_795_000_000_000 + n,
    attemptId: `attempt-${n}`,
    update,
    ...more,
  };
}
const audit = (x: string): FinishArgs['audit'] => ({
  key: `t:${x}`,
  transferId: x,
  raw: JSON.stringify({ data: { id: x, authorizationsRevoked: [{ email: 'a@b.c' }] } }),
  kind: 'transfer',
});

async function queued(org: string, id: number, force: boolean): Promise<void> {
  await store.markQueued([{ org, learnerId: id, runId: RUN, source: 'cohort.csv:2', force }]);
}

const raw = (org: string, id: number) => redis.hget(keys.outcomes(org), String(id));

describe('a final record is compacted', () => {
  it('keeps what report and retry read, writes its story to the stream, drops its dedupe keys', async () => {
    const org = newOrg();
    await queued(org, 1, false);
    const lost = attempt(org, 1, networkError);
    await store.finish(lost);
    // Not final: the whole record stays (ids whole, for replays), its dedupe key kept.
    expect(decodeRecord(await raw(org, 1))?.ai).toEqual([lost.attemptId]);
    const done = attempt(org, 1, transferred('T1'), { audit: audit('T1') });
    const r = await store.finish(done);
    expect(await redis.hget(keys.auditIds(org), 't:T1')).toBeNull();

    const text = (await raw(org, 1)) ?? '';
    const rec = decodeRecord(text);
    expect(rec).toMatchObject({
      b: 'transferred',
      c: 'transferred',
      s: 200,
      a: 2,
      x: 'T1',
      src: 'cohort.csv:2',
    });
    expect(rec?.h).toBeUndefined();
    expect(rec?.au).toBeUndefined();
    expect(rec?.ai).toBeUndefined();
    expect(rec?.ah).toEqual([shortAttemptId(lost.attemptId), shortAttemptId(done.attemptId)]);
    expect(rec?.hc).toBe('n');
    // Small: the JSON a finished learner keeps (bench/redis-bytes.ts weighs all of Redis).
    expect(Buffer.byteLength(text)).toBeLessThan(260);

    const story = await store.getWithStory(org, 1);
    expect(story?.archived).toBe(false);
    expect(story?.record.h?.map((h) => h[1])).toEqual(['network-error', 'transferred']);
    expect(story?.record.au).toEqual([r.auditId]);
    const entries = [];
    for await (const e of store.audit(org)) entries.push(e);
    expect(entries.map((e) => e.kind)).toEqual(['transfer', 'record']);
    expect(entries[1]?.result).toMatchObject({ bucket: 'transferred', auditIds: [r.auditId] });
  });

  it('a spool replay of an attempt merged before the compaction merges nothing and writes nothing', async () => {
    const org = newOrg();
    await queued(org, 2, false);
    const lost = attempt(org, 2, networkError);
    await store.finish(lost);
    const done = attempt(org, 2, transferred('T2'), { audit: audit('T2') });
    await store.finish(done);
    const before = {
      rec: await raw(org, 2),
      len: await redis.xlen(keys.audit(org)),
      counts: await store.orgCounts(org),
    };
    for (const a of [lost, done]) expect((await store.finish(structuredClone(a))).replayed).toBe(true);
    // The transfer's answer in another attempt (not a replay) is not written twice either.
    const again = await store.finish(attempt(org, 2, transferred('T2'), { audit: audit('T2') }));
    expect(again.replayed).toBe(false);
    expect(await redis.xlen(keys.audit(org))).toBe(before.len + 1); // its story entry, no answer entry
    const answers = [];
    for await (const e of store.audit(org)) if (e.kind === 'transfer') answers.push(e);
    expect(answers).toHaveLength(1);
    expect(await store.orgCounts(org)).toEqual(before.counts);
  });

  it("a transfer's own answer replayed after a repeat compacted the record is written, not lost", async () => {
    const org = newOrg();
    await queued(org, 5, false);
    // The transfer's answer reached the spool, not Redis; a later attempt got the 200 repeat naming it.
    const own = attempt(org, 5, transferred('T5'), { audit: audit('T5') });
    const repeat: Update = {
      b: 'already-in-org',
      c: 'already-in-org',
      s: 200,
      x: 'T5',
      d: 9,
      n: 1,
      ok: 1,
      lost: 1,
    };
    await store.finish(
      attempt(org, 5, repeat, {
        audit: { key: 'a:rep5', transferId: 'T5', raw: '{"data":{}}', kind: 'transfer' },
      }),
    );
    expect(await store.get(org, 5)).toMatchObject({ b: 'already-in-org', x: 'T5', pr: 1 });
    // The spool replay of the transfer's own answer: its revoked authorizations reach the stream.
    const r = await store.finish(own);
    expect(r.replayed).toBe(false);
    expect(r.auditId).toBeDefined();
    const [entry] = await store.auditEntries(org, [r.auditId as string]);
    expect(entry?.raw).toContain('a@b.c');
    expect(await store.get(org, 5)).toMatchObject({ b: 'transferred', x: 'T5' });
  });

  it('a retry re-opens it; a later repeat after its lost answer is still a possible repeat', async () => {
    const org = newOrg();
    await queued(org, 3, false);
    await store.finish(attempt(org, 3, networkError));
    await store.finish(attempt(org, 3, forbidden));
    const compacted = await store.get(org, 3);
    expect(compacted).toMatchObject({ b: 'forbidden', c: 'forbidden', m: 'not yours', hc: 'n' });
    expect(compacted?.f).toBeDefined();

    await queued(org, 3, true);
    const reopened = await store.get(org, 3);
    expect(reopened).toMatchObject({ b: 'queued', a: 2, c: 'forbidden', f: compacted?.f, hc: 'n' });

    const r = await store.finish(attempt(org, 3, repeat400));
    expect(r.possibleRepeat).toBe(true);
    const [entry] = await store.auditEntries(org, [r.auditId as string]);
    expect(entry).toMatchObject({ kind: 'possible-repeat', repeatCauses: ['no-answer'] });
    // Its whole story, through both story entries, oldest first.
    const story = await store.getWithStory(org, 3);
    expect(story?.record.h?.map((h) => h[1])).toEqual(['network-error', 'forbidden', 'already-in-org']);
    expect(story?.record.pr).toBe(1);
  });

  it('once the archive trimmed the stream, the record still answers and says its story is archived', async () => {
    const org = newOrg();
    await queued(org, 4, false);
    await store.finish(attempt(org, 4, transferred('T4'), { audit: audit('T4') }));
    await redis.xtrim(keys.audit(org), 'MAXLEN', 0);
    const story = await store.getWithStory(org, 4);
    expect(story?.archived).toBe(true);
    expect(story?.record).toMatchObject({ b: 'transferred', x: 'T4' });
  });
});
