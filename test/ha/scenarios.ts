// The main pipeline and a failover, against a Redis Cluster (3 masters + 3 replicas) or a Sentinel setup
// (1 master, 1 replica, 3 sentinels) that the test starts from the redis-server binary. The same
// scenarios for both modes: enqueue, crawl, two `work` processes, retry, report, status, the dashboard's
// pages and retry; then a master SIGKILLed mid-run, with the ledger check. Nothing of the run may land
// on the shared Redis at REDIS_URL.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDashboard } from '../../src/dashboard/server.ts';
import { runCommand, spawnCli, waitExit } from '../helpers/cli.ts';
import { bearer, csrfFromPage, DASHBOARD_TOKEN } from '../helpers/dashboard.ts';
import { expectLedger } from '../helpers/ledger.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';
import { newRedis } from '../helpers/redis.ts';
import {
  startCluster,
  startSentinel,
  type RedisClusterHandle,
  type RedisSentinelHandle,
} from '../helpers/redis-ha.ts';

type Mode = 'cluster' | 'sentinel';

interface Topology {
  env: Record<string, string>;
  /** SIGKILLs the master that serves the organization's keys; resolves with its port. */
  killMasterOf(key: string): Promise<number>;
  waitForFailover(port: number): Promise<{ newMasterPort: number; ms: number }>;
  waitForReplication(): Promise<void>;
  allKeys(pattern: string): Promise<string[]>;
  stop(): Promise<void>;
}

async function startTopology(mode: Mode): Promise<Topology> {
  if (mode === 'cluster') {
    const c: RedisClusterHandle = await startCluster();
    return {
      env: { REDIS_CLUSTER_NODES: c.seeds },
      async killMasterOf(key) {
        const port = await c.masterOf(key);
        await c.killNode(port);
        return port;
      },
      waitForFailover: (port) => c.waitForFailover(port),
      waitForReplication: () => c.waitForReplication(),
      allKeys: (p) => c.allKeys(p),
      stop: () => c.stop(),
    };
  }
  const s: RedisSentinelHandle = await startSentinel();
  return {
    env: { REDIS_SENTINELS: s.sentinels, REDIS_SENTINEL_MASTER: s.masterName },
    killMasterOf: () => s.killMaster(),
    waitForFailover: (port) => s.waitForFailover(port),
    waitForReplication: () => s.waitForReplication(),
    allKeys: (p) => s.allKeys(p),
    stop: () => s.stop(),
  };
}

const FORBIDDEN = [5, 8];

export function haSuite(mode: Mode): void {
  let topo: Topology;
  let h: Harness;

  beforeAll(async () => {
    topo = await startTopology(mode);
    h = await startHarness({
      tag: `ha-${mode}`,
      redisEnv: topo.env,
      sim: {
        learners: 900,
        forbiddenLearnerIds: FORBIDDEN,
        tokens: [
          { token: 'sim-acme-1', org: 'acme' },
          { token: 'sim-acme-2', org: 'acme' },
          { token: 'sim-beta-1', org: 'beta' },
          { token: 'sim-gamma-1', org: 'gamma' },
          { token: 'sim-gamma-2', org: 'gamma' },
        ],
        faults: { latencyAfterMs: [5, 30] },
        // The service enforces what the workers are told: a budget overrun would be answered 429.
        limits: {
          perToken: { max: 30, windowMs: 1000 },
          perOrg: { max: 60, windowMs: 1000 },
          window: 'rolling',
        },
      },
      env: {
        LEARNER_API_TOKENS:
          'acme:sim-acme-1,acme:sim-acme-2,beta:sim-beta-1,gamma:sim-gamma-1,gamma:sim-gamma-2',
        LIMIT_PER_TOKEN: '30/1s',
        LIMIT_PER_ORG: '60/1s',
        ATTEMPTS: '3',
        DASHBOARD_TOKEN,
        LOG_LEVEL: 'info',
      },
    });
  }, 90_000);

  afterAll(async () => {
    await h?.close();
    await topo?.stop();
  });

  const tooMany = () => h.sim.record.filter((r) => r.status === 429).length;

  describe(`on ${mode === 'cluster' ? 'a Redis Cluster' : 'Redis Sentinel'}`, () => {
    const acme = [...learnersNotIn('acme', 60, 20), ...FORBIDDEN];

    it('enqueue, crawl, two work processes, retry, report, status', async () => {
      const csv = h.writeFile('cohort.csv', `learner_id\n${acme.join('\n')}\n`);
      const enqueue = await runCommand(['enqueue', '--csv', csv, '--org', 'acme', '--quiet'], h.env);
      expect(enqueue.stderr).not.toMatch(/MOVED|CROSSSLOT|unexpected error/);
      expect(enqueue.code, enqueue.stderr).toBe(0);
      expect(enqueue.stdout).toContain(`enqueued   ${acme.length}`);

      const crawl = await runCommand(
        ['crawl', '--org', 'beta', '--target-org-id', '2', '--limit', '30', '--quiet'],
        h.env,
      );
      expect(crawl.code, crawl.stderr).toBe(0);
      expect(crawl.stdout).toMatch(/enqueued\s+\d+/);

      const workers = [
        spawnCli(['work', '--until-idle', '--concurrency', '4'], h.env),
        spawnCli(['work', '--until-idle', '--concurrency', '4'], h.env),
      ];
      const done = await Promise.all(workers.map((w) => waitExit(w, 90_000)));
      for (const d of done) {
        expect(d.stderr).not.toMatch(/MOVED|CROSSSLOT|unexpected error/);
        // 1: the two forbidden learners failed (exit code 1 says so); nothing else went wrong.
        expect([0, 1], d.stderr.slice(-2000)).toContain(d.code);
      }
      // Both processes took part.
      expect(done.every((d) => /succeeded/.test(d.stdout + d.stderr))).toBe(true);

      const tally = await expectLedger(h.ctx, h.sim, { org: 'acme', ids: acme });
      expect(tally.forbidden?.sort()).toEqual(FORBIDDEN);
      expect((await h.ctx.store.orgCounts('beta')).total ?? (await h.ctx.store.size('beta'))).toBeGreaterThan(
        0,
      );
      expect(tooMany()).toBe(0);

      const retry = await runCommand(['retry', '--org', 'acme', '--status', 'forbidden'], h.env);
      expect(retry.code, retry.stderr).toBe(0);
      expect(retry.stdout).toContain('re-queued 2');
      // They are forbidden again: the dashboard below finds them among the failures.
      expect((await h.workUntilIdle({ orgs: ['acme'] })).reason).toBe('idle');
      expect((await h.ctx.store.getMany('acme', FORBIDDEN)).map((r) => r?.b)).toEqual([
        'forbidden',
        'forbidden',
      ]);

      const out = join(h.dir, 'report.csv');
      const report = await runCommand(['report', '--org', 'acme', '--out', out], h.env);
      expect(report.code, report.stderr).toBe(0);
      expect(readFileSync(out, 'utf8').trim().split('\n')).toHaveLength(acme.length + 1);

      const status = await runCommand(['status'], h.env);
      expect(status.code, status.stderr).toBe(0);
      expect(status.stdout).toMatch(/acme\n\s+learners: .*transferred/);
      expect(status.stdout).toContain('beta');
    });

    it("the dashboard's pages, bull-board and retry", async () => {
      const app = await buildDashboard(h.ctx);
      try {
        for (const url of ['/', '/failures', '/api/overview', '/api/failures', '/queues/api/queues']) {
          const res = await app.inject({ url, headers: bearer });
          expect(res.statusCode, `${url}: ${res.body.slice(0, 300)}`).toBe(200);
          expect(res.body).not.toMatch(/MOVED|CROSSSLOT/);
        }
        const failures = JSON.parse((await app.inject({ url: '/api/failures', headers: bearer })).body) as {
          items: { learnerId: number }[];
        };
        expect(failures.items.map((i) => i.learnerId).sort()).toEqual(FORBIDDEN);
        const csrf = await csrfFromPage(app);
        const res = await app.inject({
          method: 'POST',
          url: '/api/retry',
          headers: { ...bearer, 'x-csrf-token': csrf, 'content-type': 'application/json' },
          payload: JSON.stringify({ learners: FORBIDDEN.map((id) => `acme:${id}`) }),
        });
        expect(res.statusCode, res.body).toBe(200);
        expect(JSON.parse(res.body)).toMatchObject({ requeued: 2 });
      } finally {
        await app.close();
      }
      const last = await h.workUntilIdle({ orgs: ['acme', 'beta'] });
      expect(last.reason).toBe('idle');
    });

    it('a master SIGKILLed mid-run: workers go on by themselves; nothing lost, nobody moved twice, no 429', async () => {
      // An organization of its own, so the ledger sees exactly this run's learners.
      const ids = learnersNotIn('gamma', 240, 400);
      const { summary } = await h.enqueueIds(ids, 'gamma');
      expect(summary.enqueued).toBe(ids.length);
      await topo.waitForReplication();
      const moved = () =>
        h.sim.record.filter((r) => r.effectApplied && ids.includes(r.learnerId ?? -1)).length;
      const workers = [
        spawnCli(['work', '--until-idle', '--concurrency', '6'], h.env),
        spawnCli(['work', '--until-idle', '--concurrency', '6'], h.env),
      ];
      const start = Date.now();
      while (moved() < 40 && Date.now() - start < 30_000) await sleep(50);
      expect(moved(), 'transfers before the kill').toBeGreaterThanOrEqual(40);
      const killedAt = Date.now();
      const port = await topo.killMasterOf(`${h.prefix}:{gamma}:out`);
      const failover = await topo.waitForFailover(port);
      const done = await Promise.all(workers.map((w) => waitExit(w, 120_000)));
      for (const d of done) expect(d.code, d.stderr.slice(-3000)).toBe(0);

      const tally = await expectLedger(h.ctx, h.sim, { org: 'gamma', ids });
      expect((tally.transferred?.length ?? 0) + (tally['already-in-org']?.length ?? 0)).toBe(ids.length);
      expect(tooMany(), '429s answered').toBe(0);
      // Transfers went on after the failover: the longest pause in arrivals at the service around it.
      const arrivals = h.sim.record
        .filter((r) => r.effectApplied && r.receivedAt >= killedAt - 1000)
        .map((r) => r.receivedAt)
        .sort((a, b) => a - b);
      expect(arrivals.at(-1) ?? 0, 'transfers after the failover').toBeGreaterThan(killedAt + failover.ms);
      let stall = 0;
      for (let i = 1; i < arrivals.length; i++)
        stall = Math.max(stall, (arrivals[i] ?? 0) - (arrivals[i - 1] ?? 0));
      console.log(
        `[${mode}] failover: master ${port} killed, new master ${failover.newMasterPort} after ${failover.ms} ms; ` +
          `longest pause in transfers ${stall} ms`,
      );
    }, 180_000);

    it('no key of the run landed anywhere but the configured Redis', async () => {
      expect((await topo.allKeys(`${h.prefix}:*`)).length).toBeGreaterThan(10);
      const shared = newRedis();
      try {
        const [, keys] = await shared.scan('0', 'MATCH', `${h.prefix}*`, 'COUNT', 100_000);
        expect(keys).toEqual([]);
      } finally {
        shared.disconnect();
      }
    });
  });
}
