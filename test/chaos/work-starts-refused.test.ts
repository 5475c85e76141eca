// `work` started while Redis refuses writes waits for it, as running workers do, then works: it does not
// stop at start. Seen in CI: in redis-refusal.test.ts a worker slow to start met the OOM in its boot
// (marking the lanes with jobs is a write) and stopped with "work could not start". Own redis-server.
import { Redis } from 'ioredis';
import { afterAll, expect, it } from 'vitest';
import { spawnCli, waitExit } from '../helpers/cli.ts';
import { expectOutcomes } from '../helpers/outcomes-check.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';
import { startOwnRedis, type OwnRedis } from '../helpers/redis-server.ts';
import { waitFor } from '../helpers/wait.ts';

const servers: OwnRedis[] = [];
let h: Harness | undefined;
afterAll(async () => {
  await h?.close();
  for (const s of servers) await s.close();
});

it('work started while Redis is full waits, then transfers every learner once Redis takes writes', async () => {
  const redis = await startOwnRedis();
  servers.push(redis);
  h = await startHarness({
    tag: 'start-refused',
    redisUrl: redis.url,
    sim: { learners: 200 },
    env: { LIMIT_PER_TOKEN: '1000/1s', LIMIT_PER_ORG: '2000/1s', LOG_LEVEL: 'info' },
  });
  const harness = h;
  const ids = learnersNotIn('acme', 10);
  await harness.enqueueIds(ids);
  const admin = new Redis(redis.url);
  try {
    const used = Number(/used_memory:(\d+)/.exec(await admin.info('memory'))?.[1] ?? 0);
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
    await admin.config('SET', 'maxmemory', String(Math.floor(used * 0.9)));
    const worker = spawnCli(['work', '--until-idle'], harness.env);
    await waitFor(
      'work to meet the refusal',
      () => worker.output.stderr,
      (text) => /Redis does not take writes/.test(text),
      { timeoutMs: 60_000 },
    );
    expect(harness.sim.record.filter((r) => r.method === 'PATCH')).toEqual([]);
    await admin.config('SET', 'maxmemory', '0');
    const r = await waitExit(worker, 90_000);
    expect(r.stderr).not.toMatch(/work could not start/);
    expect(r.stderr, r.stderr.slice(-2000)).toMatch(/workers stopped \(idle\)/);
    expect(r.code).toBe(0);
    const tally = await expectOutcomes(harness.ctx, harness.sim, { org: 'acme', ids });
    expect(tally.transferred?.length).toBe(ids.length);
  } finally {
    await admin.config('SET', 'maxmemory', '0').catch(() => {});
    admin.disconnect();
  }
}, 150_000);
