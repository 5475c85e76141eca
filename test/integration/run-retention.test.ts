// Run retention (ops/actions/run-retention.ts): a run older than RUN_RETENTION is folded into one summary, its
// keys deleted and its place in the run list dropped; it stays readable (report --run, counts) and says
// it was compacted; a recent run is untouched; one process of the fleet does it per interval (the lock).
import { afterAll, describe, expect, it } from 'vitest';
import { requireReadableRunId } from '../../src/cli/shared.ts';
import { createKeys } from '../../src/core/keys.ts';
import { createLogger } from '../../src/core/log.ts';
import { selectOutcomes } from '../../src/ops/views/report.ts';
import { compactedRunNote, compactOldRuns } from '../../src/ops/actions/run-retention.ts';
import { Runs } from '../../src/outcomes/runs.ts';
import { OutcomeStore } from '../../src/outcomes/store.ts';
import { createContext } from '../../src/app/context.ts';
import { loadConfig } from '../../src/core/config.ts';
import { retryFailed } from '../../src/ops/actions/retry.ts';
import { runCommand } from '../helpers/cli.ts';
import { deletePrefix, newRedis, randomPrefix, REDIS_URL } from '../helpers/redis.ts';

const redis = newRedis();
const prefix = randomPrefix('retention');
const keys = createKeys(prefix);
const store = new OutcomeStore(redis, keys);
const runs = new Runs(redis, keys);
const deps = { redis, keys, store, logger: createLogger({ level: 'silent' }) };
const DAY = 24 * 60 * 60 * 1000;
const NOW = Date.parse('2026-11-26T10:00:00Z');
const OLD = '20261001T000000-0old';
const NEW = '20261120T000000-0new';
const BUSY = '20260101T000000-busy';

afterAll(async () => {
  await deletePrefix(redis, prefix);
  await redis.quit();
});

async function runWithOutcomes(id: string, createdAt: number, learners: number[]): Promise<void> {
  await runs.create({ id, kind: 'csv', source: `${id}.csv`, orgs: ['acme'] }, new Date(createdAt));
  await store.markQueued(
    learners.map((learnerId) => ({ org: 'acme', learnerId, runId: id, source: 't', force: false })),
  );
  const [first, ...rest] = learners;
  await store.recordAttempt('acme', first as number, id, {
    bucket: 'forbidden', code: 'forbidden', status: 403, durationMs: 5, countsAsAttempt: true,
  }); // prettier-ignore
  for (const l of rest) {
    await store.recordAttempt('acme', l, id, {
      bucket: 'transferred', code: 'transferred', status: 200, durationMs: 5, countsAsAttempt: true,
    }); // prettier-ignore
  }
}

describe('run retention', () => {
  it('compacts a run past retention into its summary; it stays readable and says so', async () => {
    await runWithOutcomes(OLD, NOW - 40 * DAY, [1, 2, 3]);
    await runWithOutcomes(NEW, NOW - 6 * DAY, [4, 5]);
    // Old, but one of its learners still waits: in use, kept whole.
    await runWithOutcomes(BUSY, NOW - 300 * DAY, [6, 7]);
    await store.markQueued([{ org: 'acme', learnerId: 8, runId: BUSY, source: 't', force: false }]);
    const countsBefore = await store.runCounts('acme', OLD);
    expect(countsBefore).toEqual({ forbidden: 1, transferred: 2, total: 3 });
    expect(await store.runFailureSize('acme', OLD)).toBe(1);

    expect(await compactOldRuns(deps, 30 * DAY, NOW)).toEqual({
      kind: 'done',
      compacted: [OLD],
      unfinished: [BUSY],
    });
    expect(await runs.get(BUSY)).not.toHaveProperty('compacted');
    expect(await store.runCounts('acme', BUSY)).toMatchObject({ queued: 1, total: 3 });

    // Its keys are gone and it left the list; the recent run is whole.
    for (const key of [keys.run(OLD), keys.runCounters('acme', OLD), keys.runFailures('acme', OLD)])
      expect(await redis.exists(key), key).toBe(0);
    expect((await runs.list()).map((r) => r.id)).toEqual([NEW, BUSY]);
    expect(await store.runCounts('acme', NEW)).toEqual({ forbidden: 1, transferred: 1, total: 2 });

    // Readable: its metadata and counters from the summary, its rows from the records.
    const meta = await runs.get(OLD);
    expect(meta).toMatchObject({ id: OLD, kind: 'csv', source: `${OLD}.csv`, orgs: ['acme'] });
    expect(meta?.compacted?.byOrg).toEqual({ acme: countsBefore });
    expect((meta && (await runs.counts(store, meta)))?.total).toEqual(countsBefore);
    await expect(requireReadableRunId(runs, '--run', OLD)).resolves.toBeUndefined();
    expect(compactedRunNote(meta)).toMatch(new RegExp(`^run ${OLD} was compacted on .*RUN_RETENTION`));
    expect(compactedRunNote(await runs.get(NEW))).toBeUndefined();
    const rows = [];
    for await (const o of selectOutcomes(store, { orgs: ['acme'], runId: OLD })) rows.push(o.learnerId);
    expect(rows.sort()).toEqual([1, 2, 3]);

    // As an operator types it: the rows, and a word that the run was compacted (not "unknown run").
    const env = { REDIS_URL, QUEUE_PREFIX: prefix, LEARNER_API_TOKENS: 'acme:a1', LOG_LEVEL: 'silent' };
    const r = await runCommand(['report', '--run', OLD, '--org', 'acme'], env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain(`run ${OLD} was compacted on`);
    expect(r.stdout.trim().split('\n')).toHaveLength(4);
  });

  it('a retry of a learner of a compacted run starts a new run, and leaves the summary as it was', async () => {
    const config = loadConfig({
      REDIS_URL,
      QUEUE_PREFIX: prefix,
      LEARNER_API_TOKENS: 'acme:a1',
      LOG_LEVEL: 'silent',
    });
    const conn = newRedis();
    const ctx = await createContext(config, { redis: conn, logger: createLogger({ level: 'silent' }) });
    try {
      const summary = await redis.hget(keys.runsCompacted(), OLD);
      const r = await retryFailed(ctx, { orgs: ['acme'], learnerIds: [1] });
      expect(r.requeued).toBe(1);
      const rec = await store.get('acme', 1);
      expect(rec?.b).toBe('queued');
      expect(rec?.r).not.toBe(OLD);
      expect(await runs.get(rec?.r as string)).toMatchObject({
        kind: 'retry',
        source: `retry of compacted run ${OLD}`,
      });
      expect(await redis.exists(keys.runCounters('acme', OLD))).toBe(0);
      expect(await redis.hget(keys.runsCompacted(), OLD)).toBe(summary);
    } finally {
      await ctx.close();
      await conn.quit();
    }
  });

  it('one process of the fleet per interval (the lock); a later pass finds nothing more', async () => {
    expect(await compactOldRuns(deps, 30 * DAY, NOW)).toEqual({ kind: 'locked' });
    await redis.del(keys.runRetentionLock());
    expect(await compactOldRuns(deps, 30 * DAY, NOW)).toEqual({
      kind: 'done',
      compacted: [],
      unfinished: [BUSY],
    });
    // The summary of the compacted run was not rewritten from its (gone) counters.
    expect((await runs.get(OLD))?.compacted?.byOrg.acme).toMatchObject({ transferred: 2 });
  });
});
