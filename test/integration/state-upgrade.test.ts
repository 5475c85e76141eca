// A migration in progress survives an upgrade: Redis state written the way the previous release wrote
// it (runs, records, an audit entry with `result`, a waiting BullMQ job, no claims, no state version) is
// brought up to this release by createContext (upgradeState): recorded learners are claimed for their
// organization, the version is stored, old audit entries stay readable and the old job still runs.
// A prefix nothing was ever enqueued under stays untouched, and a learner the old release recorded in two
// organizations stays with the one that transferred it, with a warning. Failures recorded by the release
// before the run failure index (state version 2) are indexed, so the dashboard's run filter finds them.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createContext, type AppContext } from '../../src/app/context.ts';
import { loadConfig, type Env } from '../../src/core/config.ts';
import { failurePage } from '../../src/ops/views/failures.ts';
import { createKeys } from '../../src/core/keys.ts';
import { createLogger, type Logger } from '../../src/core/log.ts';
import { jobIdOf } from '../../src/queue/job.ts';
import { listSchedules, openControlQueue, type ControlJob } from '../../src/queue/control.ts';
import { createSimulator } from '../../src/simulator/index.ts';
import { STATE_VERSION } from '../../src/app/state-upgrade.ts';
import { startWorkers } from '../../src/worker/run-workers.ts';
import { deletePrefix, dumpPrefix, newRedis, randomPrefix, REDIS_URL } from '../helpers/redis.ts';

const redis = newRedis();
const prefixes: string[] = [];
const contexts: AppContext[] = [];
const connections: Redis[] = [];
const dirs: string[] = [];

afterEach(async () => {
  for (const ctx of contexts.splice(0)) await ctx.close();
});

afterAll(async () => {
  for (const p of prefixes) await deletePrefix(redis, p);
  for (const c of connections) await c.quit();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  await redis.quit();
});

function newPrefix(): string {
  const p = randomPrefix('upgrade');
  prefixes.push(p);
  return p;
}

function capture(): { logger: Logger; lines: () => Record<string, unknown>[] } {
  const raw: string[] = [];
  const logger = createLogger({
    level: 'debug',
    destination: { write: (line: string) => void raw.push(line) },
  });
  return { logger, lines: () => raw.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

/** A context as a new process builds it: its own connection (createContext runs upgradeState). */
async function context(prefix: string, env: Env = {}, logger?: Logger): Promise<AppContext> {
  const conn = newRedis();
  connections.push(conn);
  const config = loadConfig({
    REDIS_URL,
    QUEUE_PREFIX: prefix,
    LEARNER_API_TOKENS: 'acme:a1,beta:b1',
    LOG_LEVEL: 'silent',
    ...env,
  });
  const ctx = await createContext(config, {
    redis: conn,
    logger: logger ?? createLogger({ level: 'silent' }),
  });
  contexts.push(ctx);
  return ctx;
}

const OLD_RUN = '20250101T000000-0ld1';
const OLD_DATA = { id: 'T12', groupsRemoved: [{ id: 4 }], authorizationsRevoked: [{ id: 'auth-1' }] };

/**
 * State as the previous release left it mid-migration: a run, acme learners 10, 11, 12 queued (12
 * transferred since), an audit entry with `result`, the job of learner 11 waiting; no claim, no version.
 * markQueued is unchanged from that release and never claims.
 */
async function writeOldState(prefix: string, env: Env = {}): Promise<string> {
  const keys = createKeys(prefix);
  // Nothing under the prefix yet: this context's upgrade has nothing to do and writes nothing.
  const old = await context(prefix, env);
  await old.runs.create({ id: OLD_RUN, kind: 'csv', source: 'old.csv', orgs: ['acme'] });
  await old.store.markQueued(
    [10, 11, 12].map((learnerId) => ({
      org: 'acme',
      learnerId,
      runId: OLD_RUN,
      source: 'old.csv',
      force: false,
    })),
  );
  await old.store.recordAttempt('acme', 12, OLD_RUN, {
    bucket: 'transferred',
    code: 'transferred',
    status: 200,
    durationMs: 40,
    transferId: 'T12',
    countsAsAttempt: true,
  });
  const auditId = await redis.xadd(
    keys.audit('acme'),
    '*',
    'learnerId',
    '12',
    'runId',
    OLD_RUN,
    'transferId',
    'T12',
    'result',
    JSON.stringify(OLD_DATA),
  );
  await old.queues
    .get('acme')
    .add('transfer', { org: 'acme', learnerId: 11, runId: OLD_RUN, source: 'old' }, { jobId: 'l11' });
  expect(await redis.exists(keys.claims())).toBe(0);
  expect(await redis.exists(keys.stateVersion())).toBe(0);
  // Nor which organizations have work: a `work` of this release finds the old job at start (lanes).
  expect(await redis.exists(keys.lanesDue())).toBe(0);
  return auditId as string;
}

describe('a migration in progress survives an upgrade', () => {
  it('claims what was recorded, stores the version, keeps the audit, the records and the job', async () => {
    const prefix = newPrefix();
    const keys = createKeys(prefix);
    const auditId = await writeOldState(prefix);
    const recordsBefore = await redis.hgetall(keys.outcomes('acme'));
    const countsBefore = await redis.hgetall(keys.runCounters('acme', OLD_RUN));

    const ctx = await context(prefix);
    expect(await redis.hgetall(keys.claims())).toEqual({ '10': 'acme', '11': 'acme', '12': 'acme' });
    expect(await redis.get(keys.stateVersion())).toBe(String(STATE_VERSION));
    // The upgrade claims; it rewrites no record and no counter.
    expect(await redis.hgetall(keys.outcomes('acme'))).toEqual(recordsBefore);
    expect(await redis.hgetall(keys.runCounters('acme', OLD_RUN))).toEqual(countsBefore);

    // beta enqueuing learner 10 now finds it acme's.
    const held: string[] = [];
    const counts = await ctx.producer.add([{ org: 'beta', learnerId: 10, source: 'b.csv:2' }], 'new-run', {
      onClaimedElsewhere: (h) => void held.push(h.reason),
    });
    expect(counts.claimedElsewhere).toEqual({ acme: 1 });
    expect(counts.enqueued).toBe(0);
    expect(held[0]).toContain('acme');
    expect(await ctx.store.get('beta', 10)).toBeUndefined();

    // The old audit entry reads as before (beside the story entry of learner 12's compacted record).
    const entries = [];
    for await (const e of ctx.store.audit('acme')) if (e.kind !== 'record') entries.push(e);
    expect(entries).toEqual([
      {
        id: auditId,
        learnerId: 12,
        runId: OLD_RUN,
        transferId: 'T12',
        result: OLD_DATA,
        raw: undefined,
        kind: 'transfer',
        possibleRepeat: false,
      },
    ]);
    expect((await ctx.store.auditEntries('acme', [auditId]))[0]?.result).toEqual(OLD_DATA);

    // The old job is still there, waiting, with its data.
    const job = await ctx.queues.get('acme').getJob(jobIdOf(11));
    expect(job?.data).toEqual({ org: 'acme', learnerId: 11, runId: OLD_RUN, source: 'old' });
    expect(await job?.getState()).toBe('waiting');
  });

  it("the previous release's limits (no burst, no run window) keep working: pacing starts from LIMIT_BURST with no step", async () => {
    const prefix = newPrefix();
    const keys = createKeys(prefix);
    // The policy hash as the previous release seeded it, and one permit it counted in the token's window.
    await redis.hset(keys.policy('acme'), {
      org: '50/1000',
      token: '6/1000',
      seededFrom: JSON.stringify({ LIMIT_PER_TOKEN: '6/1s', LIMIT_PER_ORG: '50/1s' }),
    });
    const ctx = await context(prefix, { LIMIT_BURST: '2', LIMIT_PER_TOKEN: '6/1s', LIMIT_PER_ORG: '50/1s' });
    const token = ctx.config.tokens.find((t) => t.org === 'acme')?.id as string;
    // Redis's clock to the ms: whole seconds alone put the permit up to a second further back, out of
    // its 1 s window one time in a hundred or so (seen in CI: used 0).
    const [sec, micros] = await redis.time();
    const now = Number(sec) * 1000 + Math.floor(Number(micros) / 1000);
    await redis.zadd(keys.tokenLog('acme', token), now - 10, `${now - 10}.000-old`);
    // Read as before: its limits, the permit counted, nothing paused, no run window.
    const before = await ctx.budget.peek('acme', [token]);
    expect(before.tokens[0]).toMatchObject({ used: 1, limit: 6, windowMs: 1000 });
    expect(before.runWindow).toBeUndefined();
    // The first acquire of this release seeds the burst beside what is stored, and paces from there:
    // two at once, then the bucket (one every 1000 / 6 ms).
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await ctx.budget.acquire('acme', [token]));
    expect(answers.map((a) => (a.ok ? 'granted' : a.scope))).toEqual(['granted', 'granted', 'pace']);
    expect(await redis.hgetall(keys.policy('acme'))).toMatchObject({
      org: '50/1000',
      token: '6/1000',
      burst: '2',
    });
    const after = await ctx.budget.peek('acme', [token]);
    expect(after.tokens[0]?.used).toBe(1);
    expect(after.tokens[0]?.inflight).toBe(2);
    expect(after.tokens[0]?.pace).toMatchObject({ burst: 2, available: 0 });
  });

  it('runs once per prefix: a later start does not claim again', async () => {
    const prefix = newPrefix();
    const keys = createKeys(prefix);
    await writeOldState(prefix);
    await context(prefix);
    expect(await redis.get(keys.stateVersion())).toBe(String(STATE_VERSION));
    // Something after the upgrade gives learner 10 up (as a move would): a restart must not re-claim it.
    await redis.hdel(keys.claims(), '10');
    await context(prefix);
    expect(await redis.hgetall(keys.claims())).toEqual({ '11': 'acme', '12': 'acme' });
  });

  it('the old job runs to the end after the upgrade, with one call', async () => {
    const sim = createSimulator({ learners: 40 });
    await sim.listen();
    const dir = mkdtempSync(join(tmpdir(), 'lt-upgrade-'));
    dirs.push(dir);
    try {
      const prefix = newPrefix();
      const env: Env = {
        LEARNER_API_BASE_URL: sim.url,
        LEARNER_API_TOKENS: 'acme:sim-acme-1,beta:sim-beta-1',
        LIMIT_PER_TOKEN: '20/2s',
        LIMIT_PER_ORG: '60/4s',
        LIMIT_BURST: 'off',
        REQUEST_TIMEOUT: '1500ms',
        CONNECT_TIMEOUT: '500ms',
        BACKOFF: '50ms',
        ATTEMPTS: '3',
        SPOOL_DIR: join(dir, 'spool'),
        LEASE_GRACE: '1s',
      };
      await writeOldState(prefix, env);
      const ctx = await context(prefix, env);
      await startWorkers(ctx, { orgs: ['acme'], concurrency: 2, untilIdle: true, idleCheckMs: 100 }).done;
      // Learner 11 (in beta in the simulator's seed) was moved into acme by the job the old release added.
      const rec = await ctx.store.get('acme', 11);
      expect(rec?.b).toBe('transferred');
      expect(rec?.x).toBeDefined();
      expect(sim.record.filter((r) => r.method === 'PATCH' && r.learnerId === 11)).toHaveLength(1);
      // Learner 12, transferred before the upgrade, is not called again.
      expect(sim.record.filter((r) => r.learnerId === 12)).toHaveLength(0);
      expect((await ctx.store.get('acme', 12))?.x).toBe('T12');
      expect(await ctx.claims.holders([10, 11, 12])).toEqual(['acme', 'acme', 'acme']);
    } finally {
      await sim.close();
    }
  });
});

describe('upgradeState elsewhere', () => {
  it('a prefix nothing was ever enqueued under stays empty (read-only commands write nothing)', async () => {
    const prefix = newPrefix();
    const keys = createKeys(prefix);
    const ctx = await context(prefix);
    // What status, plan and report read.
    expect(await ctx.runs.list()).toEqual([]);
    expect(await ctx.store.get('acme', 1)).toBeUndefined();
    expect(await ctx.store.orgCounts('acme')).toEqual({});
    await ctx.budget.peek('acme', ['t1']);
    await context(prefix);
    expect(await redis.exists(keys.stateVersion())).toBe(0);
    expect(await dumpPrefix(redis, prefix)).toEqual([]);
  });

  it('a learner recorded in two organizations stays with the one that transferred it, with a warning', async () => {
    const prefix = newPrefix();
    const keys = createKeys(prefix);
    // beta comes first in the token list: the order organizations are scanned in must not decide.
    const env: Env = { LEARNER_API_TOKENS: 'beta:b1,acme:a1' };
    const old = await context(prefix, env);
    await old.runs.create({ id: OLD_RUN, kind: 'csv', source: 'old.csv', orgs: ['acme', 'beta'] });
    await old.store.markQueued([
      { org: 'acme', learnerId: 20, runId: OLD_RUN, source: 'a.csv', force: false },
      { org: 'beta', learnerId: 20, runId: OLD_RUN, source: 'b.csv', force: false },
      { org: 'beta', learnerId: 21, runId: OLD_RUN, source: 'b.csv', force: false },
      // An organization this process has no token for: found by its records' keys.
      { org: 'gamma', learnerId: 22, runId: OLD_RUN, source: 'g.csv', force: false },
    ]);
    await old.store.recordAttempt('acme', 20, OLD_RUN, {
      bucket: 'transferred',
      code: 'transferred',
      status: 200,
      durationMs: 30,
      transferId: 'T20',
      countsAsAttempt: true,
    });
    expect(await redis.exists(keys.claims())).toBe(0);

    const log = capture();
    await context(prefix, env, log.logger);
    expect(await redis.hgetall(keys.claims())).toEqual({ '20': 'acme', '21': 'beta', '22': 'gamma' });
    expect(await redis.get(keys.stateVersion())).toBe(String(STATE_VERSION));

    const warnings = log.lines().filter((l) => l.level === 40);
    expect(warnings).toHaveLength(1);
    const w = warnings[0] as { msg: string; conflicts: number; examples: string[] };
    expect(w.msg).toContain('more than one organization');
    expect(w.conflicts).toBe(1);
    expect(w.examples).toEqual(['20 (beta, claimed by acme)']);
    // The records themselves are left as they were.
    expect((await old.store.get('beta', 20))?.b).toBe('queued');
    expect((await old.store.get('acme', 20))?.b).toBe('transferred');
  });
});

describe('version 3: the failure index of each run', () => {
  const NEXT_RUN = '20250102T000000-0ld2';
  const T0 = 1_750_000_000_000;

  it('failures the previous release recorded (no run index, version 2) are found by the run filter after the upgrade', async () => {
    const prefix = newPrefix();
    const keys = createKeys(prefix);
    const old = await context(prefix);
    await old.runs.create({ id: OLD_RUN, kind: 'csv', source: 'old.csv', orgs: ['acme', 'beta'] });
    await old.runs.create({ id: NEXT_RUN, kind: 'retry', source: 'old', orgs: ['acme'] });
    const at = (
      org: string,
      learnerId: number,
      runId: string,
      bucket: 'not-found' | 'forbidden' | 'server-error' | 'transferred' | 'retrying',
      t: number,
    ) =>
      old.store.recordAttempt(
        org,
        learnerId,
        runId,
        { bucket, code: bucket, durationMs: 5, countsAsAttempt: true },
        T0 + t,
      );
    await at('acme', 30, OLD_RUN, 'not-found', 1);
    await at('acme', 31, OLD_RUN, 'forbidden', 2);
    await at('beta', 40, OLD_RUN, 'server-error', 3);
    await at('acme', 32, OLD_RUN, 'transferred', 4);
    await at('acme', 33, OLD_RUN, 'retrying', 5);
    await at('acme', 35, NEXT_RUN, 'server-error', 6);
    // What that release left: everything but the run failure indexes, and version 2 (claims done).
    const indexes = [
      keys.runFailures('acme', OLD_RUN),
      keys.runFailures('beta', OLD_RUN),
      keys.runFailures('acme', NEXT_RUN),
    ];
    expect(await redis.exists(...indexes)).toBe(3);
    await redis.del(...indexes);
    await redis.set(keys.stateVersion(), '2');
    const filter = { orgs: ['acme', 'beta'], runId: OLD_RUN };
    expect((await failurePage(old.store, filter, 0, 50)).items).toEqual([]);

    const ctx = await context(prefix);
    expect(await redis.get(keys.stateVersion())).toBe(String(STATE_VERSION));
    const page = await failurePage(ctx.store, filter, 0, 50);
    expect(page.total).toBe(3);
    expect(page.items.map((l) => [l.org, l.learnerId, l.state])).toEqual([
      ['acme', 31, 'forbidden'],
      ['acme', 30, 'not-found'],
      ['beta', 40, 'server-error'],
    ]);
    expect(
      (await failurePage(ctx.store, { ...filter, code: 'forbidden' }, 0, 50)).items.map((l) => l.learnerId),
    ).toEqual([31]);
    expect(
      (await failurePage(ctx.store, { orgs: ['acme'], runId: NEXT_RUN }, 0, 50)).items.map(
        (l) => l.learnerId,
      ),
    ).toEqual([35]);
    // Scored by the time of the outcome, as the scripts score it; a success or a wait is not indexed.
    const scores = async () => Promise.all(indexes.map((k) => redis.zrange(k, 0, -1, 'WITHSCORES')));
    const after = await scores();
    expect(after).toEqual([
      ['30', String(T0 + 1), '31', String(T0 + 2)],
      ['40', String(T0 + 3)],
      ['35', String(T0 + 6)],
    ]);

    // Idempotent: a second run of the step (two processes starting together) changes nothing.
    await redis.set(keys.stateVersion(), '2');
    await context(prefix);
    expect(await redis.get(keys.stateVersion())).toBe(String(STATE_VERSION));
    expect(await scores()).toEqual(after);
  });
});

describe('version 4: the control queue under a hash tag', () => {
  it('schedules and a waiting reconcile of the old `control` queue move to `{control}`, once', async () => {
    const prefix = newPrefix();
    const keys = createKeys(prefix);
    await writeOldState(prefix);
    await redis.set(keys.stateVersion(), '3');
    // What the previous release wrote: its control queue was named `control`, no hash tag.
    const conn = newRedis();
    connections.push(conn);
    const legacy = new Queue<ControlJob, unknown, string>('control', { connection: conn, prefix });
    const data = (scheduleId: string): ControlJob => ({
      kind: 'reconcile',
      scheduleId,
      desired: '/srv/schedules/acme.csv',
      defaultOrg: 'acme',
      orgIds: { acme: 7 },
    });
    // The previous release's upsertSchedule: no lane marked (lanes did not exist).
    const jobOpts = { attempts: 1, removeOnComplete: { count: 100 }, removeOnFail: { count: 100 } };
    await legacy.upsertJobScheduler(
      'nightly',
      { pattern: '0 3 * * *', tz: 'Europe/Paris' },
      { name: 'reconcile', data: data('nightly'), opts: jobOpts },
    );
    await legacy.upsertJobScheduler(
      'hourly',
      { every: 3_600_000 },
      { name: 'reconcile', data: data('hourly'), opts: jobOpts },
    );
    await legacy.add('reconcile', data('manual'), { attempts: 1 });
    expect((await legacy.getJobSchedulers(0, -1, true)).map((s) => s.key).sort()).toEqual([
      'hourly',
      'nightly',
    ]);

    const log = capture();
    const ctx = await context(prefix, {}, log.logger);
    expect(await redis.get(keys.stateVersion())).toBe(String(STATE_VERSION));
    const current = openControlQueue(conn, keys);
    try {
      const moved = await listSchedules(current);
      expect(
        moved.map((s) => [s.key, s.pattern ?? null, s.tz ?? null, s.every ? Number(s.every) : null]).sort(),
      ).toEqual([
        ['hourly', null, null, 3_600_000],
        ['nightly', '0 3 * * *', 'Europe/Paris', null],
      ]);
      expect(moved.find((s) => s.key === 'nightly')?.template?.data).toEqual(data('nightly'));
      const waiting = await current.getJobs(['waiting', 'prioritized'], 0, -1);
      expect(waiting.map((j) => j.data)).toContainEqual(data('manual'));
      // Gone from the old queue: no process of this release or the last runs them twice.
      expect(await legacy.getJobSchedulers(0, -1, true)).toEqual([]);
      expect(await legacy.getJobs(['waiting', 'prioritized', 'delayed'], 0, -1)).toEqual([]);
      expect(log.lines().find((l) => /moved to the control queue/.test(String(l.msg)))).toMatchObject({
        schedules: 2,
        jobs: 1,
      });
      // The queue keys carry the hash tag (one slot on a cluster).
      const tagged = (await dumpPrefix(redis, prefix)).filter((k) => k.startsWith(`${prefix}:{control}:`));
      expect(tagged.length).toBeGreaterThan(0);

      // Idempotent: a second start finds the old queue empty and moves nothing again.
      await redis.set(keys.stateVersion(), '3');
      await context(prefix);
      expect((await listSchedules(current)).map((s) => s.key).sort()).toEqual(['hourly', 'nightly']);
      expect((await current.getJobs(['waiting', 'prioritized'], 0, -1)).length).toBe(waiting.length);
      expect(ctx.keys.controlQueueName()).toBe('{control}');
    } finally {
      await current.close();
      await legacy.close();
    }
  });
});
