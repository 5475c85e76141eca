// Redis refusing writes, on redis-servers of the test's own (never the shared one's config): out of
// memory, a read-only replica, a failed RDB save (MISCONF), too few replicas, above the memory high-water
// mark, and gone. checkRedisWrites names each cause with its fix; the WriteGate closes and reopens,
// waitOpen resolves after the fix, and the log gets one line per transition, not one per job; status,
// /readyz, the overview banner and /metrics say it too.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type AppContext } from '../../src/app/context.ts';
import { loadConfig } from '../../src/core/config.ts';
import { READY_PROBE_INTERVAL_MS } from '../../src/dashboard/routes/health.ts';
import { buildDashboard } from '../../src/dashboard/server.ts';
import { createLogger } from '../../src/core/log.ts';
import { isWriteRefusal } from '../../src/redis/refusals.ts';
import { createKeys } from '../../src/core/keys.ts';
import { checkRedisWrites, WriteGate, type WriteState } from '../../src/redis/writes.ts';
import { OutcomeStore, type FinishArgs } from '../../src/outcomes/store.ts';
import { Recorder } from '../../src/worker/recorder.ts';
import { runCommand } from '../helpers/cli.ts';
import { deletePrefix, newRedis, randomPrefix } from '../helpers/redis.ts';
import { startOwnRedis, type OwnRedis } from '../helpers/redis-server.ts';

const PREFIX = randomPrefix('writes');
const PROBE = createKeys(PREFIX).writeProbe();
const servers: OwnRedis[] = [];
const clients: Redis[] = [];
let main: OwnRedis;
let other: OwnRedis;
let r: Redis;

// CONFIG SET dir is a protected config since Redis 7; AOF off so that only the RDB save is at stake.
const OWN_ARGS = ['--enable-protected-configs', 'yes', '--appendonly', 'no'];

beforeAll(async () => {
  main = await startOwnRedis(OWN_ARGS);
  servers.push(main);
  other = await startOwnRedis(OWN_ARGS);
  servers.push(other);
  r = newRedis(main.url);
  clients.push(r);
});
afterAll(async () => {
  for (const c of clients) c.disconnect();
  for (const s of servers) await s.close();
});

async function until(what: string, ok: () => Promise<boolean> | boolean, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

async function infoField(section: string, name: string): Promise<string | undefined> {
  const m = new RegExp(`^${name}:(.*?)\\s*$`, 'm').exec(await r.info(section));
  return m?.[1];
}

const check = (timeoutMs = 2000) => checkRedisWrites(r, { probeKey: PROBE, timeoutMs });

/** Fills Redis under a tight maxmemory until a write is refused; returns the refusal. */
async function fillUntilOom(): Promise<unknown> {
  const used = Number(await infoField('memory', 'used_memory'));
  await r.config('SET', 'maxmemory-policy', 'noeviction');
  await r.config('SET', 'maxmemory', String(used + 2_000_000));
  // Small values: a big one is refused for its own size (Redis counts the request's buffer), while
  // Redis itself is not full and a tiny write would still pass.
  const value = 'x'.repeat(1_000);
  for (let i = 0; i < 20_000; i++) {
    try {
      await r.set(`${PREFIX}:fill:${i}`, value);
    } catch (err) {
      // Full by a few bytes: buffers freed a moment later could lift the refusal. Hold it there.
      const now = Number(await infoField('memory', 'used_memory'));
      await r.config('SET', 'maxmemory', String(now - 100_000));
      return err;
    }
  }
  throw new Error('Redis never refused a write');
}

/** An answered call's attempt, as the worker records it. */
function answered(learnerId: number): FinishArgs {
  return {
    org: 'acme',
    learnerId,
    runId: 'run-writes',
    at: Date.now(),
    attemptId: `writes-att-${learnerId}`,
    update: { b: 'transferred', c: 'transferred', s: 200, x: `W${learnerId}`, d: 10, n: 1, ok: 1 },
    audit: { key: `t:W${learnerId}`, transferId: `W${learnerId}`, raw: '{"data":{}}', kind: 'transfer' },
  };
}

/**
 * A recorder behind a write gate of `r` (closed polls every 100 ms) that counts the refused tries; its
 * wait for the reopening is `waitOpen`'s.
 */
function recorderBehindGate(waitOpen: (gate: WriteGate, signal?: AbortSignal) => Promise<void>) {
  const gate = new WriteGate(r, { probeKey: PROBE, pollMs: 60_000, closedPollMs: 100 });
  const tries: number[] = [];
  const seen = {
    noteError: (err: unknown) => (tries.push(Date.now()), gate.noteError(err)),
    get isOpen() {
      return gate.isOpen;
    },
    waitOpen: (signal?: AbortSignal) => waitOpen(gate, signal),
  };
  const store = new OutcomeStore(r, createKeys(PREFIX));
  const recorder = new Recorder({ store, logger: createLogger({ level: 'silent' }), gate: seen });
  return { gate, tries, store, recorder };
}

async function undoOom(): Promise<void> {
  await r.config('SET', 'maxmemory', '0');
  await deletePrefix(r, `${PREFIX}:fill`);
}

async function breakRdbSave(): Promise<string> {
  const dir = (await r.config('GET', 'dir')) as string[];
  const original = dir[1] as string;
  const doomed = mkdtempSync(join(tmpdir(), 'lt-misconf-'));
  await r.config('SET', 'save', '3600 1');
  await r.config('SET', 'stop-writes-on-bgsave-error', 'yes');
  await r.config('SET', 'dir', doomed);
  // We run as root: a chmod would not stop the save; a directory that is gone does.
  rmSync(doomed, { recursive: true, force: true });
  await until(
    'no save in progress',
    async () => (await infoField('persistence', 'rdb_bgsave_in_progress')) === '0',
  );
  await r.bgsave();
  await until(
    'the save to fail',
    async () => (await infoField('persistence', 'rdb_last_bgsave_status')) === 'err',
  );
  return original;
}

async function repairRdbSave(original: string): Promise<void> {
  await r.config('SET', 'dir', original);
  await until(
    'no save in progress',
    async () => (await infoField('persistence', 'rdb_bgsave_in_progress')) === '0',
  );
  await r.bgsave();
  await until(
    'the save to succeed',
    async () => (await infoField('persistence', 'rdb_last_bgsave_status')) === 'ok',
  );
  await r.config('SET', 'save', '');
}

describe('checkRedisWrites names the cause', () => {
  it('ok: writes work, no maxmemory (ratio null), and the probe key is written with an expiry', async () => {
    const s = await check();
    expect(s).toMatchObject({ writable: true, cause: 'ok', memoryRatio: null });
    expect(await r.pttl(PROBE)).toBeGreaterThan(50_000);
  });

  it('OOM: filled to maxmemory with noeviction', async () => {
    const refused = await fillUntilOom();
    try {
      expect(isWriteRefusal(refused)).toEqual({ cause: 'OOM' });
      const s = await check();
      expect(s.writable).toBe(false);
      expect(s.cause).toBe('OOM');
      expect(s.memoryRatio).toBeGreaterThan(0.9);
      expect(s.message).toContain(
        'raise maxmemory, or export and trim the audit (learner-transfer audit --out FILE --trim, or AUDIT_ARCHIVE_DIR)',
      );
    } finally {
      await undoOom();
    }
    expect((await check()).cause).toBe('ok');
  });

  it('high-water: above the mark the probe goes through, yet writable is false', async () => {
    // used_memory moves between two reads by more than the data: a client's query and reply buffers grow
    // and shrink in 16 KB steps (clientsCron resizes them on its own schedule, and a big SCAN or UNLINK
    // an earlier test ran leaves a big one behind for a while), a replication backlog (left by a
    // REPLICAOF test) takes 16 KB blocks. Against the ~1.1 MB of an empty Redis, a mark 6% away is 65 KB,
    // within those swings: the second probe could find Redis above maxmemory and be refused (OOM). With
    // 8 MB of ballast of its own the same swings move the ratio by well under 1%, whatever ran before.
    const ballast = `${PREFIX}:ballast`;
    const fill = r.pipeline();
    for (let i = 0; i < 160; i++) fill.set(`${ballast}:${i}`, 'b'.repeat(50_000));
    await fill.exec();
    // Halfway between the two marks the test uses (90% and 99%).
    const target = 0.945;
    const used = Number(await infoField('memory', 'used_memory'));
    await r.config('SET', 'maxmemory', String(Math.floor(used / target)));
    try {
      await r.del(PROBE);
      const s = await check();
      expect(s).toMatchObject({ writable: false, cause: 'high-water' });
      expect(s.memoryRatio).toBeGreaterThan(0.9);
      expect(s.memoryRatio).toBeLessThan(0.99);
      expect(s.message).toMatch(/^Redis is at 9\d% of maxmemory, above the high-water mark of 90%/);
      expect(await r.exists(PROBE)).toBe(1);
      // A mark of 99% lets the same Redis through.
      const through = await checkRedisWrites(r, { probeKey: PROBE, highWater: 0.99 });
      expect(through.cause, JSON.stringify(through)).toBe('ok');
    } finally {
      await r.config('SET', 'maxmemory', '0');
      await deletePrefix(r, ballast);
    }
  });

  it('READONLY: a replica (REPLICAOF), until REPLICAOF NO ONE', async () => {
    await r.replicaof('127.0.0.1', other.port);
    try {
      await until('the replica to refuse writes', async () => (await check()).cause === 'READONLY');
      const s = await check();
      expect(s.writable).toBe(false);
      expect(s.message).toBe(
        'Redis is a read-only replica (after a failover, or REPLICAOF): point REDIS_URL at the master',
      );
    } finally {
      await r.replicaof('NO', 'ONE');
    }
    expect((await check()).cause).toBe('ok');
  });

  it('MISCONF: the RDB save failed (its directory deleted), until a save succeeds again', async () => {
    const original = await breakRdbSave();
    try {
      const s = await check();
      expect(s).toMatchObject({ writable: false, cause: 'MISCONF' });
      expect(s.message).toContain('fix the disk or the dir, see the Redis log');
    } finally {
      await repairRdbSave(original);
    }
    expect((await check()).cause).toBe('ok');
  });

  it('NOREPLICAS: min-replicas-to-write 1 with no replica', async () => {
    await r.config('SET', 'min-replicas-to-write', '1');
    try {
      const s = await check();
      expect(s).toMatchObject({ writable: false, cause: 'NOREPLICAS' });
      expect(s.message).toContain('fewer replicas than min-replicas-to-write');
    } finally {
      await r.config('SET', 'min-replicas-to-write', '0');
    }
    expect((await check()).cause).toBe('ok');
  });

  it('connection: no answer within the timeout, and no pile of probes behind a dead connection', async () => {
    const own = await startOwnRedis(OWN_ARGS);
    servers.push(own);
    const c = newRedis(own.url);
    clients.push(c);
    await c.ping();
    await own.stop();
    await until('the client to see the connection gone', () => c.status !== 'ready');
    const started = Date.now();
    const states = await Promise.all(
      [1, 2, 3].map(() => checkRedisWrites(c, { probeKey: PROBE, timeoutMs: 300 })),
    );
    expect(states.map((s) => s.cause)).toEqual(['connection', 'connection', 'connection']);
    expect(Date.now() - started).toBeLessThan(5_000);
    await checkRedisWrites(c, { probeKey: PROBE, timeoutMs: 300 });
    // Three checks at once and one later share the two commands of the first (INFO and SET).
    expect((c as unknown as { offlineQueue: { length: number } }).offlineQueue.length).toBeLessThanOrEqual(2);
    await own.restart();
    await until(
      'the connection back',
      async () => (await checkRedisWrites(c, { probeKey: PROBE })).cause === 'ok',
    );
  });
});

describe('WriteGate', () => {
  it('closes on a refused write, waits, reopens after the fix, and logs one line per transition', async () => {
    const lines: string[] = [];
    const logger = createLogger({
      level: 'debug',
      destination: { write: (l: string) => void lines.push(l) },
    });
    // Open, this gate checks once a minute: only noteError can close it within the test.
    const byJobs = new WriteGate(r, { probeKey: PROBE, pollMs: 60_000, closedPollMs: 200, logger });
    // This one finds the refusals by polling, with no job to tell it.
    const byPoll = new WriteGate(r, { probeKey: PROBE, pollMs: 300, closedPollMs: 200, logger });
    const changes: WriteState[] = [];
    byPoll.onChange((s) => changes.push(s));
    try {
      expect((await byJobs.start()).cause).toBe('ok');
      await byJobs.waitOpen(); // open: at once
      expect(byJobs.noteError(new Error('some other failure'))).toBe(false);
      expect(byJobs.state.writable).toBe(true);

      // 1. The jobs' writes are refused (OOM): closed at once, without waiting for a poll.
      const refused = await fillUntilOom();
      expect(byJobs.state.writable).toBe(true);
      // Every job of every worker meets the refusal: one line in the log for all of them.
      for (let i = 0; i < 1000; i++) expect(byJobs.noteError(refused)).toBe(true);
      expect(byJobs.state).toMatchObject({ writable: false, cause: 'OOM' });
      const waits = Promise.all([1, 2, 3].map(() => byJobs.waitOpen()));
      let resolved = false;
      void waits.then(() => (resolved = true));
      await sleep(700); // several closed polls: still OOM
      expect(resolved).toBe(false);
      expect(byJobs.state.cause).toBe('OOM');
      const aborted = new AbortController();
      const abortedWait = byJobs.waitOpen(aborted.signal);
      aborted.abort(new Error('shutting down'));
      await expect(abortedWait).rejects.toThrow('shutting down');
      await undoOom();
      const fixedAt = Date.now();
      await waits;
      expect(Date.now() - fixedAt).toBeLessThan(10_000);
      expect(byJobs.state.cause).toBe('ok');
      byJobs.stop();

      expect((await byPoll.start()).cause).toBe('ok');
      // 2. A failover makes it a replica: the poll finds it on its own.
      await r.replicaof('127.0.0.1', other.port);
      try {
        await until('the gate to close', () => !byPoll.state.writable);
        expect(byPoll.state.cause).toBe('READONLY');
      } finally {
        await r.replicaof('NO', 'ONE');
      }
      await byPoll.waitOpen(AbortSignal.timeout(10_000));

      // 3. MISCONF, found by the poll as well.
      const original = await breakRdbSave();
      try {
        await until('the gate to close', () => !byPoll.state.writable);
        expect(byPoll.state.cause).toBe('MISCONF');
      } finally {
        await repairRdbSave(original);
      }
      await byPoll.waitOpen(AbortSignal.timeout(10_000));
    } finally {
      byJobs.stop();
      byPoll.stop();
      await undoOom();
    }
    const logged = lines.map((l) => JSON.parse(l) as { level: number; msg: string; cause?: string });
    const closed = logged.filter((l) => l.msg.startsWith('Redis does not take writes'));
    const reopened = logged.filter((l) => l.msg.startsWith('Redis takes writes again'));
    expect(closed.map((l) => l.cause)).toEqual(['OOM', 'READONLY', 'MISCONF']);
    expect(closed.every((l) => l.level === 50)).toBe(true); // error
    expect(closed[0]?.msg).toContain('raise maxmemory');
    expect(reopened).toHaveLength(3);
    expect(reopened.every((l) => l.level === 30)).toBe(true); // info
    expect(reopened[0]?.msg).toMatch(/after \d+\.\d s \(OOM\)/);
    // A handful of lines for 1000 refused jobs and three outages (a replica may answer LOADING for a
    // moment while it syncs: one more line, "still does not take writes").
    expect(logged.length).toBeGreaterThanOrEqual(6);
    expect(logged.length).toBeLessThanOrEqual(8);
    // onChange heard the closings (the metrics listen there).
    const closings = changes.filter((s) => !s.writable).map((s) => s.cause);
    expect(closings[0]).toBe('READONLY');
    expect(closings.at(-1)).toBe('MISCONF');
  });

  it('an outcome write refused waits out the refusal, and goes as soon as the gate reopens', async () => {
    // The recorder backs off to 2 s between tries; it must not sleep through the reopening (a closing
    // lane waits for this job, and a Redis crash meanwhile would keep it waiting longer: fault seed 18).
    const { gate, tries, store, recorder } = recorderBehindGate((g, signal) => g.waitOpen(signal));
    try {
      await gate.start();
      await fillUntilOom();
      const recorded = recorder.record(answered(7), false);
      // Tries at 0, 0.2, 0.6, 1.4 and 3 s: the next one is 2 s after the fifth.
      await until('five refused tries', () => tries.length >= 5);
      const lifted = Date.now();
      await undoOom();
      await recorded;
      expect(Date.now() - lifted, 'ms from the fix to the record').toBeLessThan(1_000);
      expect(recorder.waiting).toBe(0);
      expect((await store.get('acme', 7))?.x).toBe('W7');
    } finally {
      gate.stop();
      await undoOom();
    }
  });

  it('a wait for the gate refused at once (work stopping) leaves the backoff in place', async () => {
    // As a stopped work's gate answers: the wait for the reopening is refused at once.
    const { gate, tries, recorder } = recorderBehindGate((g) => g.waitOpen(AbortSignal.abort()));
    const shutdown = new AbortController();
    try {
      await gate.start();
      await fillUntilOom();
      const recorded = recorder.record(answered(8), false, shutdown.signal).catch(() => 'stopped');
      await sleep(1_500);
      // Tries at 0, 0.2, 0.6 and 1.4 s, not one after the other as fast as Redis answers.
      expect(tries.length).toBeLessThanOrEqual(6);
      shutdown.abort();
      expect(await recorded).toBe('stopped');
    } finally {
      gate.stop();
      await undoOom();
    }
  });

  it('closes for the high-water mark and reopens only clearly below it', async () => {
    const gate = new WriteGate(r, {
      probeKey: PROBE,
      pollMs: 200,
      closedPollMs: 100,
      highWater: 0.9,
      hysteresis: 0.1,
    });
    try {
      await gate.start();
      const used = Number(await infoField('memory', 'used_memory'));
      await r.config('SET', 'maxmemory', String(Math.floor(used / 0.94)));
      await until('the gate to close', () => !gate.state.writable);
      expect(gate.state.cause).toBe('high-water');
      // 85%: under the mark, but within the hysteresis (10 points here): stays closed.
      await r.config('SET', 'maxmemory', String(Math.floor(used / 0.85)));
      await sleep(600);
      expect(gate.state).toMatchObject({ writable: false, cause: 'high-water' });
      await r.config('SET', 'maxmemory', String(Math.floor(used / 0.5)));
      await gate.waitOpen(AbortSignal.timeout(10_000));
      expect(gate.state.memoryRatio).toBeLessThan(0.6);
    } finally {
      gate.stop();
      await r.config('SET', 'maxmemory', '0');
    }
  });

  it('closes while Redis is gone and reopens when it is back', async () => {
    const own = await startOwnRedis(OWN_ARGS);
    servers.push(own);
    const c = newRedis(own.url);
    clients.push(c);
    const gate = new WriteGate(c, { probeKey: PROBE, pollMs: 200, closedPollMs: 100, timeoutMs: 300 });
    try {
      await gate.start();
      await own.stop();
      await until('the gate to close', () => !gate.state.writable);
      expect(gate.state.cause).toBe('connection');
      await own.restart();
      await gate.waitOpen(AbortSignal.timeout(15_000));
    } finally {
      gate.stop();
    }
  });
});

describe('surfaces', () => {
  let ctx: AppContext;
  const prefix = randomPrefix('writes-ui');
  beforeAll(async () => {
    const config = loadConfig({
      REDIS_URL: main.url,
      QUEUE_PREFIX: prefix,
      LEARNER_API_TOKENS: 'acme:ui-tok-1',
    });
    ctx = await createContext(config, { logger: createLogger({ level: 'silent' }) });
  });
  afterAll(async () => {
    await r.config('SET', 'min-replicas-to-write', '0');
    await deletePrefix(r, prefix);
    await ctx?.close();
  });

  it('status, /readyz, the overview banner and /metrics say when Redis refuses writes, and only then', async () => {
    const app = await buildDashboard(ctx, { token: undefined, bullBoard: false });
    try {
      const env = { REDIS_URL: main.url, QUEUE_PREFIX: prefix, LEARNER_API_TOKENS: 'acme:ui-tok-1' };
      const fine = await runCommand(['status'], env);
      expect(fine.code, fine.stderr).toBe(0);
      expect(fine.stdout).not.toContain('REDIS:');
      expect((await app.inject({ url: '/readyz' })).json()).toEqual({ status: 'ready', redis: 'ok' });
      expect((await app.inject({ url: '/api/overview' })).json().alerts).toEqual([]);

      await r.config('SET', 'min-replicas-to-write', '1');
      const refused = await runCommand(['status'], env);
      expect(refused.code, refused.stderr).toBe(0);
      expect(refused.stdout).toContain(
        'REDIS: Redis has fewer replicas than min-replicas-to-write and refuses writes',
      );

      // /readyz answers from a probe at most READY_PROBE_INTERVAL_MS old: the first one may be younger.
      await sleep(READY_PROBE_INTERVAL_MS + 100);
      const ready = await app.inject({ url: '/readyz' });
      expect(ready.statusCode).toBe(503);
      expect(ready.json()).toEqual({ status: 'unavailable', redis: 'refusing writes (NOREPLICAS)' });
      expect(ready.body).not.toContain(String(main.port));

      const overview = (await app.inject({ url: '/api/overview' })).json();
      expect(overview.redis).toMatchObject({ writable: false, cause: 'NOREPLICAS' });
      expect(overview.alerts[0]).toMatchObject({ level: 'error', org: null });
      expect(overview.alerts[0].message).toContain('min-replicas-to-write');
      const page = await app.inject({ url: '/' });
      expect(page.body).toContain('Redis has fewer replicas than min-replicas-to-write');

      const metrics = (await app.inject({ url: '/metrics' })).body;
      expect(metrics).toMatch(/^learner_transfer_redis_writable\{cause="NOREPLICAS"\} 0$/m);

      await r.config('SET', 'min-replicas-to-write', '0');
      await sleep(1100); // the metrics snapshot lives one second
      const after = (await app.inject({ url: '/metrics' })).body;
      expect(after).toMatch(/^learner_transfer_redis_writable\{cause="ok"\} 1$/m);
      // No maxmemory: 0 (a Redis with a limit never shows 0: it holds something).
      expect(after).toMatch(/^learner_transfer_redis_memory_ratio 0$/m);
      await r.config('SET', 'maxmemory', String(Number(await infoField('memory', 'used_memory')) * 4));
      await sleep(1100);
      expect((await app.inject({ url: '/metrics' })).body).toMatch(
        /^learner_transfer_redis_memory_ratio 0\.[1-4]\d*$/m,
      );
    } finally {
      // Whatever failed above, the next test starts from a Redis that takes writes.
      await r.config('SET', 'min-replicas-to-write', '0');
      await r.config('SET', 'maxmemory', '0');
      await app.close();
    }
  });

  it('a command that must write while Redis is full says so in one sentence, exit 4, no stack trace', async () => {
    const env = { REDIS_URL: main.url, QUEUE_PREFIX: prefix, LEARNER_API_TOKENS: 'acme:ui-tok-1' };
    expect(isWriteRefusal(await fillUntilOom())).toEqual({ cause: 'OOM' });
    try {
      // pause and resume write the policy in one MULTI: Redis refuses it whole (EXECABORT).
      for (const command of ['pause', 'resume']) {
        const r2 = await runCommand([command, '--org', 'acme'], env);
        expect(r2.code, r2.stderr).toBe(4);
        expect(r2.stderr).toMatch(/^learner-transfer: Redis refuses writes: out of memory/m);
        expect(r2.stderr).toContain('nothing was changed');
        expect(r2.stderr).not.toMatch(/unexpected error|EXECABORT|\n\s+at /);
      }
    } finally {
      await undoOom();
    }
  });
});
