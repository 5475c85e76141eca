// Hundreds of organizations on one fleet, as `work` processes serve them for real: the Redis connections
// of each process stay within REDIS_MAX_CONNECTIONS (CLIENT LIST, by the pid each connection's name ends
// with), an idle fleet sends next to no commands (INFO stats on a redis-server of this file's own, since
// other files share the default one), and 200 organizations with work at once each move at their own full
// speed. Counts come from Redis and the simulator's record; the one time bound is the issue's own (2 s).
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newRunId } from '../../src/outcomes/runs.ts';
import { progressOf } from '../../src/outcomes/run-progress.ts';
import type { SimOrg } from '../../src/simulator/types.ts';
import { spawnCli, waitExit } from '../helpers/cli.ts';
import { startHarness, type Harness } from '../helpers/pipeline.ts';
import { requireRedisServer, startOwnRedis, type OwnRedis } from '../helpers/redis-server.ts';
import { waitFor } from '../helpers/wait.ts';

const orgKey = (i: number) => `o${String(i).padStart(3, '0')}`;

/** A source organization, then `n` schools: learner i starts in organizations[(i - 1) % (n + 1)]. */
function world(n: number): SimOrg[] {
  return [
    { id: 1, key: 'src', name: 'Source' },
    ...Array.from({ length: n }, (_, i) => ({ id: i + 2, key: orgKey(i + 1), name: `School ${i + 1}` })),
  ];
}

/** `count` learners for the organization at `index` (1-based) that are not already its own. */
function learnersFor(organizations: SimOrg[], index: number, count: number, stride: number): number[] {
  const ids: number[] = [];
  const org = organizations[index]?.key;
  for (let id = (index - 1) * stride + 2; ids.length < count; id++) {
    if (organizations[(id - 1) % organizations.length]?.key !== org) ids.push(id);
  }
  return ids;
}

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

describe('200 organizations with work at once', () => {
  const N = 200;
  const PER_ORG = 70;
  const SPAN_MS = 60_000;
  const organizations = world(N);
  const tokens = organizations.slice(1).map((o) => ({ org: o.key, token: `sim-${o.key}-1` }));
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({
      tag: 'fair',
      redisUrl: own.url,
      sim: {
        organizations,
        learners: (N + 1) * PER_ORG + 10,
        tokens,
        // The service enforces the same limits: a call over them would be a 429 in the record.
        limits: {
          perToken: { max: 10, windowMs: 5_000 },
          perOrg: { max: 10, windowMs: 10_000 },
          window: 'rolling',
        },
      },
      env: {
        LEARNER_API_TOKENS: tokens.map((t) => `${t.org}:${t.token}`).join(','),
        LIMIT_PER_TOKEN: '10/5s',
        LIMIT_PER_ORG: '10/10s',
        LOG_LEVEL: 'warn',
        REQUEST_TIMEOUT: '5s',
      },
    });
  }, 60_000);
  afterAll(async () => {
    await h?.close();
  });

  it('gives every organization 0.9 or more of its limits over 60 s, each starting within 2 s', async () => {
    const runId = newRunId();
    const orgs = tokens.map((t) => t.org);
    await h.ctx.runs.create({ id: runId, kind: 'csv', source: 'fair.csv', orgs });
    // Each organization gets more learners than its limits allow in the span, none of them its own.
    for (const [i, org] of orgs.entries()) {
      await h.ctx.producer.add(
        learnersFor(organizations, i + 1, PER_ORG, PER_ORG).map((learnerId) => ({
          org,
          learnerId,
          source: 'fair.csv',
        })),
        runId,
      );
    }
    // One process, the default cap (32 connections: 29 workers attached at most, for 200 organizations).
    const works = [spawnCli(['work'], { ...h.env, CONCURRENCY: '10' })];
    const counted = () => h.sim.record.filter((r) => r.method === 'PATCH' && r.countedAt !== undefined);
    // The span starts at the first counted transfer of any organization.
    const t0 = await waitFor(
      'the first transfer',
      () => counted()[0]?.countedAt,
      (t) => t !== undefined,
      { timeoutMs: 30_000, everyMs: 20 },
    );
    await new Promise((r) => setTimeout(r, (t0 as number) + SPAN_MS + 500 - Date.now()));
    for (const w of works) w.kill('SIGTERM');
    for (const w of works) expect((await waitExit(w, 30_000)).code).toBe(130);

    const start = t0 as number;
    const calls = counted().filter((r) => (r.countedAt as number) < start + SPAN_MS);
    const perOrg = new Map<string, number>();
    const first = new Map<string, number>();
    for (const r of calls) {
      const org = r.org as string;
      perOrg.set(org, (perOrg.get(org) ?? 0) + 1);
      if (!first.has(org)) first.set(org, r.countedAt as number);
    }
    // What the limits allow one organization in the span: 10 per 10 s, 6 windows.
    const allowed = 60;
    const short = orgs.map((org) => ({ org, n: perOrg.get(org) ?? 0 })).filter((o) => o.n < 0.9 * allowed);
    const late = orgs
      .map((org) => ({ org, afterMs: (first.get(org) ?? Infinity) - start }))
      .filter((o) => o.afterMs > 2_000);
    const counts = orgs.map((org) => perOrg.get(org) ?? 0);
    console.log(
      `fairness: ${calls.length} transfers in ${SPAN_MS / 1000} s; per organization ${Math.min(...counts)} to ` +
        `${Math.max(...counts)} of ${allowed}; the last first transfer ` +
        `${Math.max(...[...first.values()].map((t) => t - start))} ms after the first`,
    );
    expect(short, 'organizations under 0.9 of their limits').toEqual([]);
    expect(late, 'organizations whose first transfer came more than 2 s after the first').toEqual([]);
    expect(h.sim.record.filter((r) => r.result === 'rate-limited')).toEqual([]);
    expect(h.sim.violations()).toEqual([]);
  }, 180_000);
});
