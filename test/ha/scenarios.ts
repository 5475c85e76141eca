// The main pipeline and a failover, against the run's shared Redis Cluster (3 masters + 3 replicas) or
// Sentinel setup (1 master, 1 replica, 3 sentinels), started from the redis-server binary (topologies.ts).
// The same scenarios for both modes: enqueue, crawl, two `work` processes, retry, report, status, the
// dashboard's pages and retry; a master SIGKILLed mid-run, with the outcome store check; and no key of a run
// anywhere but the configured Redis. Each test has a run of its own (its own key prefix, simulator and
// workers), so that each sets up what it needs and the order of the tests does not matter.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDashboard } from '../../src/dashboard/server.ts';
import { runCommand, spawnCli, waitExit } from '../helpers/cli.ts';
import { bearer, csrfFromPage, DASHBOARD_TOKEN } from '../helpers/dashboard.ts';
import { expectOutcomes } from '../helpers/outcomes-check.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';
import { REDIS_URL } from '../helpers/redis.ts';
import type { FailoverResult } from '../helpers/redis-ha.ts';
import {
  keysEverywhere,
  scanWhole,
  sharedCluster,
  sharedSentinel,
  useTopologies,
  type TopologyName,
} from '../helpers/topologies.ts';
import { waitForCount } from '../helpers/wait.ts';

type Mode = 'cluster' | 'sentinel';

interface Topology {
  name: TopologyName;
  env: Record<string, string>;
  /** How long a failover may take, from the topology's configuration (redis-ha.ts). */
  failoverBoundMs: number;
  /** The port of the master that serves `key`. */
  masterOf(key: string): Promise<number>;
  /** SIGKILLs that master (the one masterOf named). */
  kill(port: number): Promise<void>;
  waitForFailover(port: number): Promise<FailoverResult>;
  waitForReplication(): Promise<void>;
  /** The killed master back, as a replica: the topology as the next test or file expects it. */
  heal(): Promise<void>;
}

async function topologyOf(mode: Mode, call: ReturnType<typeof useTopologies>): Promise<Topology> {
  if (mode === 'cluster') {
    const c = await sharedCluster(call);
    return {
      name: 'cluster',
      // Plain text: the TLS ports of the same nodes are redis-auth-tls.test.ts's.
      env: { REDIS_CLUSTER_NODES: c.info.plainSeeds, REDIS_PASSWORD: c.info.password },
      failoverBoundMs: c.info.failoverBoundMs,
      masterOf: (key) => c.masterOf(key),
      kill: (port) => c.killNode(port),
      waitForFailover: (port) => c.waitForFailover(port),
      waitForReplication: () => c.waitForReplication(),
      heal: () => c.heal(),
    };
  }
  const s = await sharedSentinel(call);
  return {
    name: 'sentinel',
    env: { REDIS_SENTINELS: s.info.sentinels, REDIS_SENTINEL_MASTER: s.info.masterName },
    failoverBoundMs: s.info.failoverBoundMs,
    masterOf: () => s.masterPort(),
    async kill(port) {
      const killed = await s.killMaster();
      if (killed !== port) throw new Error(`the master moved from ${port} to ${killed} before the kill`);
    },
    waitForFailover: (port) => s.waitForFailover(port),
    waitForReplication: () => s.waitForReplication(),
    heal: () => s.heal(),
  };
}

const FORBIDDEN = [5, 8];

export function haSuite(mode: Mode): void {
  const topologies = useTopologies();
  let topo: Topology;
  const open = new Set<Harness>();

  beforeAll(async () => {
    topo = await topologyOf(mode, topologies);
  }, 90_000);

  afterAll(async () => {
    await Promise.all([...open].map((h) => h.close()));
  });

  /** A run of the test's own on the topology: its own prefix, simulator and temporary directory. */
  async function run(tag: string, latencyAfterMs: [number, number] = [5, 30]): Promise<Harness> {
    const h = await startHarness({
      // QUEUE_PREFIX holds 32 characters: lt-test- + 12 + -8 hex.
      tag: `${mode === 'cluster' ? 'hc' : 'hs'}-${tag}`,
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
        faults: { latencyAfterMs },
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
    open.add(h);
    return h;
  }

  async function close(h: Harness): Promise<void> {
    open.delete(h);
    await h.close();
  }

  const tooMany = (h: Harness) => h.sim.record.filter((r) => r.status === 429).length;

  /**
   * Every key of the run is on the topology it was told to use: none on the shared Redis at REDIS_URL
   * and none on any other topology of this test run (each scanned to the end of its SCAN cursor, on
   * every master).
   */
  async function expectKeysOnlyOnTopology(h: Harness): Promise<void> {
    const pattern = `${h.prefix}*`;
    const where = await keysEverywhere(topologies, pattern);
    expect(where[topo.name]?.length ?? 0, `keys of the run on the ${topo.name} topology`).toBeGreaterThan(10);
    for (const [name, keys] of Object.entries(where)) {
      if (name !== topo.name) expect(keys, `keys of the run on the ${name} topology`).toEqual([]);
    }
    expect(await scanWhole(REDIS_URL, undefined, pattern), `keys of the run at ${REDIS_URL}`).toEqual([]);
  }

  /** The warn and error lines of a harness's log (pino levels 40 and up), the last 20. */
  const warningsOf = (lines: readonly string[]) =>
    lines
      .filter((l) => /"level":(4|5|6)0/.test(l))
      .slice(-20)
      .join('');

  describe(`on ${mode === 'cluster' ? 'a Redis Cluster' : 'Redis Sentinel'}`, () => {
    const acme = [...learnersNotIn('acme', 60, 20), ...FORBIDDEN];

    it('enqueue, crawl, two work processes, retry, report, status', async () => {
      const h = await run('pipe');
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
      expect(crawl.stdout).toMatch(/enqueued\s+[1-9]\d*/);

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

      const tally = await expectOutcomes(h.ctx, h.sim, { org: 'acme', ids: acme });
      expect(tally.forbidden?.sort()).toEqual(FORBIDDEN);
      expect((await h.ctx.store.orgCounts('beta')).total ?? (await h.ctx.store.size('beta'))).toBeGreaterThan(
        0,
      );
      expect(tooMany(h)).toBe(0);

      const retry = await runCommand(['retry', '--org', 'acme', '--status', 'forbidden', '--yes'], h.env);
      expect(retry.code, retry.stderr).toBe(0);
      expect(retry.stdout).toContain('re-queued 2');
      // They are forbidden again. A stop for another reason than idle shows the warnings that say why
      // (a boot that failed logs it at error level).
      const again = await h.workUntilIdle({ orgs: ['acme'] });
      expect(again.reason, warningsOf(h.logLines)).toBe('idle');
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
      await close(h);
    });

    it("the dashboard's pages, bull-board and retry", async () => {
      const h = await run('dash');
      // Failures for the dashboard to show: the forbidden learners, beside a few that go through.
      const ids = [...learnersNotIn('acme', 6, 20), ...FORBIDDEN];
      expect((await h.enqueueIds(ids, 'acme')).summary.enqueued).toBe(ids.length);
      expect((await h.workUntilIdle({ orgs: ['acme'] })).reason).toBe('idle');
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
          payload: JSON.stringify({ learners: FORBIDDEN.map((id) => `acme:${id}`), confirmPermanent: true }),
        });
        expect(res.statusCode, res.body).toBe(200);
        expect(JSON.parse(res.body)).toMatchObject({ requeued: 2 });
      } finally {
        await app.close();
      }
      const before = h.sim.record.filter((r) => FORBIDDEN.includes(r.learnerId ?? -1)).length;
      expect((await h.workUntilIdle({ orgs: ['acme'] })).reason).toBe('idle');
      // The retry re-ran them: each asked the service once more.
      expect(h.sim.record.filter((r) => FORBIDDEN.includes(r.learnerId ?? -1)).length).toBe(before + 2);
      await close(h);
    });

    it('a master SIGKILLed mid-run: workers go on by themselves; nothing lost, nobody moved twice, no 429', async () => {
      // The service holds its answers from the moment calls are seen in flight until the master is dead,
      // so the kill meets calls on the wire however long asking the topology's owner to kill takes (the
      // master's address from the sentinels, then the kill: 10-20 ms when idle, more than the calls'
      // whole latency on a busy machine).
      const h = await run('fail', [80, 160]);
      // Enough that most are still to move at the kill (about 40 have moved by then).
      const ids = learnersNotIn('gamma', 160, 400);
      const { summary } = await h.enqueueIds(ids, 'gamma');
      expect(summary.enqueued).toBe(ids.length);
      await topo.waitForReplication();
      const mine = (r: { learnerId?: number }) => ids.includes(r.learnerId ?? -1);
      const moved = () => h.sim.record.filter((r) => r.effectApplied && mine(r)).length;
      const inFlight = () => h.sim.record.filter((r) => r.status === 0 && mine(r)).length;
      const port = await topo.masterOf(`${h.prefix}:{gamma}:out`);
      const workers = [
        spawnCli(['work', '--until-idle', '--concurrency', '6'], h.env),
        spawnCli(['work', '--until-idle', '--concurrency', '6'], h.env),
      ];
      let failover: FailoverResult;
      let seenInFlight = 0;
      try {
        try {
          await waitForCount('transfers before the kill', moved, 40, { timeoutMs: 60_000 });
          const release = h.sim.holdAnswers();
          try {
            await waitForCount('transfer calls in flight', inFlight, 2, { everyMs: 2 });
            seenInFlight = Date.now();
            await topo.kill(port);
          } finally {
            release();
          }
          failover = await topo.waitForFailover(port);
        } catch (err) {
          for (const w of workers) w.kill('SIGKILL');
          throw err;
        }
        const done = await Promise.all(workers.map((w) => waitExit(w, 120_000)));
        for (const d of done) expect(d.code, d.stderr.slice(-3000)).toBe(0);
      } finally {
        // The next test or file gets the topology whole again, whatever happened here.
        await topo.heal();
      }

      // The failover met work in flight: calls on the wire when the master died, learners still to move.
      const { killedAt } = failover;
      const outstanding = h.sim.record.filter(
        (r) => mine(r) && r.receivedAt <= killedAt && (r.respondedAt ?? Infinity) > killedAt,
      );
      expect(
        outstanding.length,
        `transfer calls outstanding at the kill (${killedAt - seenInFlight} ms after calls were seen in flight)`,
      ).toBeGreaterThan(0);
      const movedBefore = h.sim.record.filter(
        (r) => r.effectApplied && mine(r) && (r.respondedAt ?? Infinity) <= killedAt,
      ).length;
      expect(ids.length - movedBefore, 'learners still to move at the kill').toBeGreaterThan(ids.length / 2);
      // Within what the topology's configuration promises (clusterFailoverBoundMs / sentinelFailoverBoundMs).
      expect(failover.ms, 'failover').toBeLessThanOrEqual(topo.failoverBoundMs);

      const tally = await expectOutcomes(h.ctx, h.sim, { org: 'gamma', ids });
      expect((tally.transferred?.length ?? 0) + (tally['already-in-org']?.length ?? 0)).toBe(ids.length);
      expect(tooMany(h), '429s answered').toBe(0);
      // Transfers went on after the failover.
      const last = Math.max(
        ...h.sim.record.filter((r) => r.effectApplied && mine(r)).map((r) => r.receivedAt),
      );
      expect(last, 'transfers after the failover').toBeGreaterThan(killedAt + failover.ms);
      await expectKeysOnlyOnTopology(h);
      await close(h);
    }, 180_000);

    it('no key of the run landed anywhere but the configured Redis', async () => {
      const h = await run('keys');
      const ids = learnersNotIn('acme', 8, 20);
      expect((await h.enqueueIds(ids, 'acme')).summary.enqueued).toBe(ids.length);
      expect((await h.workUntilIdle({ orgs: ['acme'] })).reason).toBe('idle');
      await expectKeysOnlyOnTopology(h);
      await close(h);
    });
  });
}
