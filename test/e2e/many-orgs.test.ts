// Hundreds of organizations on one fleet, as `work` processes serve them for real: the Redis connections
// of each process stay within REDIS_MAX_CONNECTIONS (CLIENT LIST, by the pid each connection's name ends
// with), and an idle fleet sends next to no commands (INFO stats on a redis-server of this file's own,
// since other files share the default one). Counts come from Redis and the simulator's record. The
// fairness of many organizations at once is test/e2e/fairness.test.ts (even shares) and bench/fairness.ts
// (how much of its limits each gets, and how soon).
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newRunId } from '../../src/outcomes/runs.ts';
import { progressOf } from '../../src/outcomes/run-progress.ts';
import { learnersFor, world } from '../helpers/schools.ts';
import { spawnCli, waitExit } from '../helpers/cli.ts';
import { startHarness, type Harness } from '../helpers/pipeline.ts';
import { requireRedisServer, startOwnRedis, type OwnRedis } from '../helpers/redis-server.ts';
import { waitFor } from '../helpers/wait.ts';

/** Connections per `work` process: every name a process gives ends with `:PID`. */
async function connectionsByPid(own: OwnRedis, pids: readonly number[]): Promise<Map<number, number>> {
  const { Redis } = await import('ioredis');
  const r = new Redis(own.url);
  try {
    const list = String(await r.client('LIST'));
    const out = new Map<number, number>(pids.map((p) => [p, 0]));
    for (const line of list.split('\n')) {
      const name = /(?:^| )name=(\S*)/.exec(line)?.[1] ?? '';
      const pid = Number(/:(\d+)$/.exec(name)?.[1]);
      if (out.has(pid)) out.set(pid, (out.get(pid) ?? 0) + 1);
    }
    return out;
  } finally {
    r.disconnect();
  }
}

async function commandsProcessed(own: OwnRedis): Promise<number> {
  const { Redis } = await import('ioredis');
  const r = new Redis(own.url);
  try {
    const info = await r.info('stats');
    return Number(/total_commands_processed:(\d+)/.exec(info)?.[1]);
  } finally {
    r.disconnect();
  }
}

let own: OwnRedis;
beforeAll(async () => {
  requireRedisServer();
  own = await startOwnRedis();
});
afterAll(async () => {
  await own?.close();
});

describe('300 organizations, two work processes, a token file', () => {
  const N = 300;
  const CAP = 10;
  const organizations = world(N);
  const tokens = organizations.slice(1).map((o) => ({ org: o.key, token: `sim-${o.key}-1` }));
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({
      tag: 'orgs300',
      redisUrl: own.url,
      sim: { organizations, learners: (N + 1) * 3 + 10, tokens },
      env: {
        LEARNER_API_TOKENS: tokens.map((t) => `${t.org}:${t.token}`).join(','),
        LIMIT_PER_TOKEN: '50/1s',
        LIMIT_PER_ORG: '50/1s',
        LOG_LEVEL: 'warn',
      },
    });
  }, 60_000);
  afterAll(async () => {
    await h?.close();
  });

  it('moves everyone once, within the connection cap of each process, and idles for next to nothing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lt-orgs-'));
    const tokenFile = join(dir, 'learner-tokens');
    writeFileSync(
      tokenFile,
      `# one ORG:TOKEN per line (test-only)\n\n${tokens.map((t) => `${t.org}:${t.token}`).join('\n')}\n`,
      { mode: 0o600 },
    );
    const runId = newRunId();
    const orgs = tokens.map((t) => t.org);
    await h.ctx.runs.create({ id: runId, kind: 'csv', source: 'schools.csv', orgs });
    const wanted = new Map<number, string>();
    for (const [i, org] of orgs.entries()) {
      const ids = learnersFor(organizations, i + 1, 2, 3);
      for (const id of ids) wanted.set(id, org);
      await h.ctx.producer.add(
        ids.map((learnerId) => ({ org, learnerId, source: 'schools.csv' })),
        runId,
      );
    }
    const env = { ...h.env, LEARNER_API_TOKENS_FILE: tokenFile, REDIS_MAX_CONNECTIONS: String(CAP) };
    delete (env as Record<string, string | undefined>).LEARNER_API_TOKENS;
    const workers = [0, 1].map((i) =>
      spawnCli(['work'], { ...env, SPOOL_DIR: join(dir, `spool-${i}`), CONCURRENCY: '4' }),
    );
    const pids = workers.map((w) => w.pid as number);
    const peak = new Map<number, number>(pids.map((p) => [p, 0]));
    let samples = 0;
    let lanesSeen = 0;
    const sampler = setInterval(() => {
      void connectionsByPid(own, pids).then((now) => {
        samples++;
        for (const [pid, n] of now) {
          peak.set(pid, Math.max(peak.get(pid) ?? 0, n));
          if (n > 3) lanesSeen++;
        }
      });
    }, 50);
    try {
      await waitFor(
        'every learner of the run to be done',
        async () => {
          const counts = await Promise.all(orgs.map((org) => h.ctx.store.runCounts(org, runId)));
          return counts.reduce((n, c) => n + progressOf(c).waiting, 0);
        },
        (waiting) => waiting === 0,
        { timeoutMs: 120_000, everyMs: 250, show: (w) => `${w} learners still waiting` },
      );
    } finally {
      clearInterval(sampler);
    }
    // Each learner in its own organization, moved once; nothing refused for the limits.
    for (const [id, org] of wanted) {
      expect(h.sim.learner(id)?.organizationId, `learner ${id}`).toBe(
        organizations.find((o) => o.key === org)?.id,
      );
      expect(h.sim.ownerChanges(id), `learner ${id} moved`).toBe(1);
    }
    expect(h.sim.record.filter((r) => r.status === 429)).toEqual([]);
    const records = await Promise.all(
      orgs.map((org) =>
        h.ctx.store.getMany(
          org,
          [...wanted].filter(([, o]) => o === org).map(([id]) => id),
        ),
      ),
    );
    expect(records.flat().map((r) => r?.b)).toEqual([...wanted].map(() => 'transferred'));
    // Within the cap, and the cap was met: workers were attached while the work went on.
    expect(samples).toBeGreaterThan(5);
    expect(lanesSeen).toBeGreaterThan(0);
    for (const pid of pids) expect(peak.get(pid), `connections of work ${pid}`).toBeLessThanOrEqual(CAP);

    // Idle: every lane let go (3 connections each), then the commands of both processes over 10 s.
    await waitFor(
      'both processes to hold only their 3 fixed connections',
      () => connectionsByPid(own, pids),
      (now) => [...now.values()].every((n) => n === 3),
      { timeoutMs: 30_000, everyMs: 200, show: (now) => JSON.stringify([...now]) },
    );
    const before = await commandsProcessed(own);
    await new Promise((r) => setTimeout(r, 10_000));
    // The first INFO is counted in the second reading.
    const idle = (await commandsProcessed(own)) - before - 1;
    console.log(`many orgs: peak connections ${JSON.stringify([...peak])}; idle ${idle} commands in 10 s`);
    // The goal: at most 1 command a second per process, whatever the number of organizations.
    expect(idle).toBeLessThanOrEqual(2 * 10);

    for (const w of workers) w.kill('SIGTERM');
    for (const w of workers) expect((await waitExit(w, 30_000)).code).toBe(130);
  }, 240_000);
});
