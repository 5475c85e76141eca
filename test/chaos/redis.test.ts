// Redis faults, on redis-servers of the test's own (own port, own directory, AOF on): restarted mid-run
// (workers reconnect and finish, nothing lost), unreachable at start (a clear message, retries, exit 4),
// coming up late (the worker waits for it), and an eviction policy that could drop jobs (a warning).
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/core/log.ts';
import { connectRedis } from '../../src/redis/client.ts';
import { standaloneTarget } from '../../src/core/redis-target.ts';
import { EXIT } from '../../src/cli/shared.ts';
import { Redis } from 'ioredis';
import { runCli, runCommand, spawnCli, waitExit } from '../helpers/cli.ts';
import { REDIS_URL } from '../helpers/redis.ts';
import { atStake, callsInFlight, expectAtStake, type AtStake } from '../helpers/at-stake.ts';
import { expectOutcomes } from '../helpers/outcomes-check.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';
import { freePort, startOwnRedis, type OwnRedis } from '../helpers/redis-server.ts';
import { waitFor, waitForCount } from '../helpers/wait.ts';

const servers: OwnRedis[] = [];
let h: Harness | undefined;
afterAll(async () => {
  await h?.close();
  for (const s of servers) await s.close();
});

const STACK = /\n\s+at .+:\d+:\d+/;

describe('Redis faults', () => {
  it('restarted mid-run: the workers reconnect and finish, nothing lost, nobody moved twice', async () => {
    const redis = await startOwnRedis();
    servers.push(redis);
    h = await startHarness({
      tag: 'chaos-redis',
      redisUrl: redis.url,
      sim: {
        learners: 600,
        repeatMode: 'mixed',
        faults: { latencyAfterMs: [20, 100] },
        limits: {
          perToken: { max: 40, windowMs: 2000 },
          perOrg: { max: 80, windowMs: 2000 },
          window: 'rolling',
        },
      },
      env: { LIMIT_PER_TOKEN: '40/2s', LIMIT_PER_ORG: '80/2s', REQUEST_TIMEOUT: '1s', LOG_LEVEL: 'warn' },
    });
    const harness = h;
    const ids = learnersNotIn('acme', 200);
    await harness.enqueueIds(ids);
    const workers = [0, 1].map(() => spawnCli(['work', '--until-idle', '--concurrency', '6'], harness.env));
    const moved = () => harness.sim.record.filter((r) => r.effectApplied).length;
    await waitForCount('learners moved', moved, 40);
    // 40 moves can spend the first windows (40/2s a token), with nothing in flight until they free: the
    // restart then met no call (a run with eight files at once). The service holds its answers from here
    // until Redis is down, so the restart meets a call in flight however slow the machine, and the held
    // answers come while Redis is down.
    const release = harness.sim.holdAnswers();
    let stake: AtStake;
    try {
      await waitForCount('transfer calls in flight', () => callsInFlight(harness.sim), 1);
      stake = atStake(harness.sim, ids, 'the Redis restart');
      await redis.stop();
    } finally {
      release();
    }
    expectAtStake(stake);
    // Down for 1.5 s: longer than a request, shorter than a job lock.
    await sleep(1500);
    await redis.start();
    const results = await Promise.all(workers.map((w) => waitExit(w, 120_000)));
    for (const r of results) {
      expect(r.stderr).toMatch(/workers stopped \(idle\)/);
      expect(r.code, r.stderr.slice(-2000)).toBe(0);
      expect(r.stderr).not.toMatch(STACK);
    }
    // The workers noticed the restart (ioredis reconnected), and went on.
    expect(results.map((r) => r.stderr).join('')).toMatch(
      /redis connection error|worker error|ECONNREFUSED|Connection is closed/,
    );
    const tally = await expectOutcomes(harness.ctx, harness.sim, { org: 'acme', ids });
    expect((tally.transferred?.length ?? 0) + (tally['already-in-org']?.length ?? 0)).toBe(ids.length);
    expect(harness.sim.violations()).toEqual([]);
  }, 150_000);

  it('unreachable at start: says so while retrying, then exits 4 with a clear message and no stack', async () => {
    const port = await freePort();
    const r = await runCli(['work', '--until-idle'], {
      REDIS_URL: `redis://:hunter2pass@127.0.0.1:${port}`,
      REDIS_CONNECT_TIMEOUT: '1500ms',
      LEARNER_API_BASE_URL: 'http://127.0.0.1:9',
      LEARNER_API_TOKENS: 'acme:unreachable-test-token',
    });
    expect(r.code).toBe(EXIT.redis);
    expect(r.stderr).toContain('Redis does not answer yet; retrying for up to 2 s');
    expect(r.stderr).toContain(
      `learner-transfer: Redis at redis://:***@127.0.0.1:${port} did not answer within 1.5 s`,
    );
    expect(r.stderr).toContain('ECONNREFUSED');
    expect(r.stderr).not.toMatch(STACK);
    expect(r.stderr).not.toContain('hunter2pass');
    expect(r.stderr).not.toContain('unreachable-test-token');
  });

  it('coming up late: work waits for Redis, then runs', async () => {
    const port = await freePort();
    const child = spawnCli(['work', '--until-idle'], {
      REDIS_URL: `redis://127.0.0.1:${port}`,
      REDIS_CONNECT_TIMEOUT: '30s',
      QUEUE_PREFIX: `lt-test-late-${port}`,
      LEARNER_API_BASE_URL: 'http://127.0.0.1:9',
      LEARNER_API_TOKENS: 'acme:late-test-token',
    });
    await waitFor(
      "work to say it is retrying (stderr: 'retrying')",
      () => child.output.stderr,
      (stderr) => stderr.includes('retrying'),
      { everyMs: 50 },
    );
    expect(child.output.stderr).toContain('Redis does not answer yet');
    servers.push(await startOwnRedis([], port));
    const r = await waitExit(child, 60_000);
    expect(r.stderr).toMatch(/workers stopped \(idle\)/);
    expect(r.code).toBe(EXIT.ok);
  });

  it("warns at start when maxmemory-policy is not noeviction (eviction loses BullMQ's jobs)", async () => {
    const redis = await startOwnRedis(['--maxmemory-policy', 'allkeys-lru']);
    servers.push(redis);
    const lines: string[] = [];
    const logger = createLogger({ destination: { write: (l: string) => void lines.push(l) } });
    const conn = await connectRedis(standaloneTarget(redis.url), { logger, timeoutMs: 5000 });
    await conn.quit();
    expect(lines.join('')).toContain("Redis maxmemory-policy is 'allkeys-lru'");
    // And through the CLI, on stderr, for a person to read.
    const r = await runCommand(['status'], {
      REDIS_URL: redis.url,
      QUEUE_PREFIX: 'lt-test-evict',
      LEARNER_API_TOKENS: 'acme:evict-token-1',
    });
    expect(r.code).toBe(0);
    expect(r.stderr).toContain("maxmemory-policy is 'allkeys-lru'");
    expect(r.stderr).toContain('Set maxmemory-policy noeviction');
    // A noeviction server (one of this test's own) gets no such warning.
    const noeviction = await startOwnRedis(['--maxmemory-policy', 'noeviction']);
    servers.push(noeviction);
    const quiet: string[] = [];
    const ok = await connectRedis(standaloneTarget(noeviction.url), {
      logger: createLogger({ destination: { write: (l: string) => void quiet.push(l) } }),
    });
    await ok.quit();
    expect(quiet.join('')).not.toContain('maxmemory-policy');
  });

  it('warns at start when Redis keeps nothing on disk (a restart would lose queues, budget and audit)', async () => {
    const NOTHING = 'Redis keeps nothing on disk';
    const connectLogging = async (url: string) => {
      const lines: string[] = [];
      const logger = createLogger({ destination: { write: (l: string) => void lines.push(l) } });
      const conn = await connectRedis(standaloneTarget(url), { logger, timeoutMs: 5000 });
      await conn.quit();
      return lines.map((l) => JSON.parse(l) as { level: number; msg: string; appendonly?: string });
    };
    // The shared Redis of the tests: the warning follows its actual settings, read first.
    const probe = new Redis(REDIS_URL);
    const [, sharedAof] = (await probe.config('GET', 'appendonly')) as string[];
    const [, sharedSave] = (await probe.config('GET', 'save')) as string[];
    await probe.quit();
    const shared = (await connectLogging(REDIS_URL)).filter((l) => l.msg.includes(NOTHING));
    expect(shared).toHaveLength(sharedAof === 'no' && sharedSave === '' ? 1 : 0);

    // A Redis with neither AOF nor snapshots: one warning, that names the losses and the fix.
    const bare = await startOwnRedis(['--appendonly', 'no', '--save', '']);
    servers.push(bare);
    const warned = (await connectLogging(bare.url)).filter((l) => l.msg.includes(NOTHING));
    expect(warned).toHaveLength(1);
    expect(warned[0]?.level).toBe(40); // warn
    expect(warned[0]?.appendonly).toBe('no');
    for (const words of [
      'restart would lose the queues',
      'transfer budget log',
      'audit',
      'Set appendonly yes',
    ])
      expect(warned[0]?.msg).toContain(words);

    // AOF on (startOwnRedis's default), or RDB snapshots alone: something survives a restart, no warning.
    const aof = await startOwnRedis();
    servers.push(aof);
    expect((await connectLogging(aof.url)).filter((l) => l.msg.includes(NOTHING))).toEqual([]);
    const rdb = await startOwnRedis(['--appendonly', 'no', '--save', '3600 1']);
    servers.push(rdb);
    expect((await connectLogging(rdb.url)).filter((l) => l.msg.includes(NOTHING))).toEqual([]);

    // CONFIG refused (a managed Redis): nothing can be known, so no warning, and no failure either.
    const managed = await startOwnRedis([
      '--appendonly',
      'no',
      '--save',
      '',
      '--rename-command',
      'CONFIG',
      '',
    ]);
    servers.push(managed);
    expect(await connectLogging(managed.url)).toEqual([]);
  });
});
