// The compact record is a change of stored format (state version 5): records the previous release wrote
// whole (history `h`, attempt ids `ai`, audit ids `au`, dedupe keys in audit:ids) are read by report,
// retry and the dashboard before the upgrade and after it, when they are compacted the way finish-attempt
// compacts a record that ends final now; a replay of an attempt merged by the old release merges nothing.
import { afterAll, describe, expect, it } from 'vitest';
import { createContext, type AppContext } from '../../src/app/context.ts';
import { STATE_VERSION } from '../../src/app/state-upgrade.ts';
import { loadConfig } from '../../src/core/config.ts';
import { createKeys } from '../../src/core/keys.ts';
import { createLogger } from '../../src/core/log.ts';
import { selectOutcomes } from '../../src/ops/views/report.ts';
import { retryFailed } from '../../src/ops/actions/retry.ts';
import { toLearnerOutcome, type LearnerOutcome } from '../../src/outcomes/record.ts';
import { Runs } from '../../src/outcomes/runs.ts';
import { OutcomeStore } from '../../src/outcomes/store.ts';
import { deletePrefix, newRedis, randomPrefix, REDIS_URL } from '../helpers/redis.ts';

const redis = newRedis();
const prefix = randomPrefix('upgrade-compact');
const keys = createKeys(prefix);
const RUN = '20261001T000000-0ld5';
const T = 1_790_000_000_000;
let ctx: AppContext | undefined;

afterAll(async () => {
  await ctx?.close();
  await deletePrefix(redis, prefix);
  await redis.quit();
});

/** acme as version 4 left it: 20 transferred after a lost answer, 21 forbidden, 22 waiting to retry. */
async function writeVersion4State(): Promise<string> {
  await new Runs(redis, keys).create({ id: RUN, kind: 'csv', source: 'old.csv', orgs: ['acme'] });
  const body = JSON.stringify({ data: { id: 'T20', authorizationsRevoked: [{ email: 'x@y.z' }] } });
  const auditId = (await redis.xadd(keys.audit('acme'), '*', 'learnerId', '20', 'runId', RUN,
    'transferId', 'T20', 'kind', 'transfer', 'at', String(T + 2), 'raw', body)) as string; // prettier-ignore
  await redis.hset(keys.auditIds('acme'), 't:T20', auditId);
  const base = { r: RUN, q: T, src: 'old.csv:2', k: 'tok1' };
  const records = {
    '20': { ...base, b: 'transferred', t: T + 2, c: 'transferred', s: 200, a: 2, x: 'T20', au: [auditId],
      h: [[T + 1, 'network-error', 0, 1500], [T + 2, 'transferred', 200, 12]], ai: ['old-a1', 'old-a2'] },
    '21': { ...base, b: 'forbidden', t: T + 3, c: 'forbidden', s: 403, e: 'Forbidden', m: 'not yours', a: 1,
      h: [[T + 3, 'forbidden', 403, 8]], ai: ['old-b1'] },
    '22': { ...base, b: 'retrying', t: T + 4, c: 'server-error', s: 500, a: 1,
      h: [[T + 4, 'server-error', 500, 9]], ai: ['old-c1'] },
  }; // prettier-ignore
  for (const [id, rec] of Object.entries(records))
    await redis.hset(keys.outcomes('acme'), id, JSON.stringify(rec));
  await redis.zadd(keys.outcomeIndex('acme', 'forbidden'), T + 3, '21');
  await redis.zadd(keys.outcomeIndex('acme', 'retrying'), T + 4, '22');
  await redis.zadd(keys.runFailures('acme', RUN), T + 3, '21');
  const counts = { transferred: 1, forbidden: 1, retrying: 1 };
  await redis.hset(keys.orgCounts('acme'), counts);
  await redis.hset(keys.runCounters('acme', RUN), { ...counts, total: 3 });
  await redis.hset(keys.claims(), { '20': 'acme', '21': 'acme', '22': 'acme' });
  await redis.set(keys.stateVersion(), '4');
  return auditId;
}

/** What report and the dashboard show of each learner (the dashboard with its story read back). */
async function views(store: OutcomeStore) {
  const report: LearnerOutcome[] = [];
  for await (const o of selectOutcomes(store, { orgs: ['acme'] })) report.push(o);
  report.sort((a, b) => a.learnerId - b.learnerId);
  const dashboard = [];
  for (const id of [20, 21, 22]) {
    const s = await store.getWithStory('acme', id);
    if (s) dashboard.push(toLearnerOutcome('acme', id, s.record));
  }
  // Report rows carry no history or audit ids (REPORT_COLUMNS).
  const rows = report.map(({ history: _h, auditIds: _a, ...row }) => row);
  return { rows, dashboard };
}

describe('records written whole by version 4', () => {
  it('read the same before and after the upgrade, which compacts the final ones', async () => {
    const auditId = await writeVersion4State();
    const before = await views(new OutcomeStore(redis, keys));
    expect(before.dashboard[0]?.history.map((h) => h.outcome)).toEqual(['network-error', 'transferred']);
    expect(before.dashboard[0]?.auditIds).toEqual([auditId]);

    const config = loadConfig({
      REDIS_URL,
      QUEUE_PREFIX: prefix,
      LEARNER_API_TOKENS: 'acme:a1',
      LOG_LEVEL: 'silent',
    });
    ctx = await createContext(config, { redis: newRedis(), logger: createLogger({ level: 'silent' }) });
    expect(await redis.get(keys.stateVersion())).toBe(String(STATE_VERSION));

    const after = await views(ctx.store);
    expect(after).toEqual(before);
    // Compacted: the final ones, not the one still waiting.
    const raw = await redis.hgetall(keys.outcomes('acme'));
    expect(JSON.parse(raw['20'] ?? '{}')).not.toHaveProperty('h');
    expect(JSON.parse(raw['20'] ?? '{}')).toHaveProperty('hc', 'n');
    expect(JSON.parse(raw['21'] ?? '{}')).not.toHaveProperty('ai');
    expect(JSON.parse(raw['22'] ?? '{}')).toHaveProperty('ai', ['old-c1']);
    expect(await redis.hgetall(keys.auditIds('acme'))).toEqual({});
    expect(await ctx.store.orgCounts('acme')).toEqual({ transferred: 1, forbidden: 1, retrying: 1 });

    // A spool replay of an attempt the old release merged: nothing merged, nothing written.
    const len = await redis.xlen(keys.audit('acme'));
    const replay = await ctx.store.finish({
      org: 'acme', learnerId: 20, runId: RUN, at: T + 2, attemptId: 'old-a2',
      update: { b: 'transferred', c: 'transferred', s: 200, x: 'T20', d: 12, n: 1, ok: 1 },
      audit: { key: 't:T20', transferId: 'T20', raw: '{}', kind: 'transfer' },
    }); // prettier-ignore
    expect(replay.replayed).toBe(true);
    expect(await redis.xlen(keys.audit('acme'))).toBe(len);

    // Retry finds the compacted failure and re-opens it, its story kept.
    const retried = await retryFailed(ctx, { orgs: ['acme'] });
    expect(retried.requeued).toBe(1);
    const reopened = await ctx.store.getWithStory('acme', 21);
    expect(reopened?.record).toMatchObject({ b: 'queued', a: 1, m: 'not yours' });
    expect(reopened?.record.h?.map((h) => h[1])).toEqual(['forbidden']);
  });
});
