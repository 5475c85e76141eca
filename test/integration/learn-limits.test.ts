// The service has the last word: two `work` processes configured for 25/2s per token
// against a simulator that allows 10/2s per token learn its real limit from its first 429s, share it
// through Redis, and keep the 429s at or below 10% of the calls over the run, with every learner moved
// exactly once and no attempt lost; `limits show` and `status` show the learned limits and the 429s.
// Against a service that matches the configuration, nothing is learned and no call is answered 429.
// Compressed windows (2 s), the real CLI, the real simulator.
import { afterEach, describe, expect, it } from 'vitest';
import type { OrgLimits } from '../../src/ops/views/limits.ts';
import { buildDashboard } from '../../src/dashboard/server.ts';
import type { RequestRecord, SimulatorOptions } from '../../src/simulator/index.ts';
import { runCommand, spawnCli, waitExit } from '../helpers/cli.ts';
import { authed, DASHBOARD_TOKEN } from '../helpers/dashboard.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const TOKEN_WINDOW_MS = 2000;
/** What the workers are configured for (and the stored policy is seeded from). */
const ENV = {
  LIMIT_PER_TOKEN: '25/2s',
  LIMIT_PER_ORG: '60/4s',
  REQUEST_TIMEOUT: '1s',
  LOG_LEVEL: 'warn',
  DASHBOARD_TOKEN,
};

async function runTwoWorkers(
  sim: SimulatorOptions,
  count: number,
): Promise<{ h: Harness; ids: number[]; patches: RequestRecord[] }> {
  const harness = await startHarness({ tag: 'learn', sim, env: ENV });
  h = harness;
  const ids = learnersNotIn('acme', count);
  await harness.enqueueIds(ids);
  const workers = [
    spawnCli(['work', '--until-idle', '--concurrency', '4'], harness.env),
    spawnCli(['work', '--until-idle', '--concurrency', '4'], harness.env),
  ];
  const results = await Promise.all(workers.map((w) => waitExit(w, 80_000)));
  for (const r of results) {
    expect(r.stderr).toMatch(/workers stopped \(idle\)/);
    expect(r.code).toBe(0);
  }
  const patches = harness.sim.record.filter((r) => r.method === 'PATCH' && r.org === 'acme');
  return { h: harness, ids, patches };
}

/** Every learner moved exactly once, recorded done, nothing failed or left waiting. */
async function expectAllMovedOnce(harness: Harness, ids: readonly number[]): Promise<void> {
  for (const id of ids) {
    const rec = await harness.ctx.store.get('acme', id);
    expect(rec?.b, `learner ${id}`).toBe('transferred');
    expect(harness.sim.ownerChanges(id), `learner ${id}`).toBe(1);
  }
  expect(harness.sim.violations()).toEqual([]);
}

describe('learning the service limits with two work processes', () => {
  it(
    'against a stricter service: 429s stay at or below 10% of the calls, nobody lost or moved twice',
    { timeout: 100_000 },
    async () => {
      const { h, ids, patches } = await runTwoWorkers(
        {
          learners: 700,
          faults: { latencyAfterMs: [10, 60] },
          limits: { perToken: { max: 10, windowMs: TOKEN_WINDOW_MS }, window: 'rolling' },
        },
        300,
      );
      await expectAllMovedOnce(h, ids);
      const refused = patches.filter((r) => r.status === 429);
      const share = refused.length / patches.length;
      const counted = patches.filter((r) => r.countedAt !== undefined && r.status !== 429);
      expect(share, `${refused.length} of ${patches.length} calls answered 429`).toBeLessThanOrEqual(0.1);
      // How much of the service's limit the fleet spends once it learned it is a figure, not a verdict:
      // bench/limiter.ts ('stricter service: utilization of its limit'). A loaded machine's workers react
      // late to each refusal (runs at load 15 measured 0.79 and 0.84 against the 0.87 it used to assert).
      // No attempt was used by a 429 (each learner's one transfer succeeded at its first counted call).
      const perLearner = new Map<number, number>();
      for (const r of counted) perLearner.set(r.learnerId ?? 0, (perLearner.get(r.learnerId ?? 0) ?? 0) + 1);
      expect([...perLearner.values()].every((n) => n === 1)).toBe(true);

      // The fleet learned the tokens' limit (not the organization's), and shows it with the 429s.
      const show = await runCommand(['limits', 'show', '--org', 'acme', '--json'], h.env);
      expect(show.code).toBe(0);
      const acme = (JSON.parse(show.stdout) as { orgs: OrgLimits[] }).orgs[0];
      expect(acme?.learned).toBeNull();
      expect(acme?.tokens).toHaveLength(2);
      const total429 = (acme?.tokens ?? []).reduce((n, t) => n + (t.rateLimited ?? 0), 0);
      expect(total429).toBe(refused.length);
      for (const t of acme?.tokens ?? []) {
        expect(t.limit).toBe('25/2s');
        // Learned at or below the service's 10 (a probe step may be in force when the run ends).
        if (t.learnedDetail) {
          expect(t.learnedDetail.max).toBeLessThanOrEqual(10);
          expect(t.learnedDetail.max).toBeGreaterThanOrEqual(5);
        }
      }
      expect((acme?.tokens ?? []).some((t) => t.learnedDetail !== null)).toBe(true);
      const text = await runCommand(['limits', 'show', '--org', 'acme'], h.env);
      expect(text.stdout).toMatch(/token +limit +learned +429s +paused/);
      expect(text.stdout).toMatch(/25\/2s +\d+\/2s +\d+ +no/);
      const status = await runCommand(['status'], h.env);
      expect(status.code).toBe(0);
      expect(status.stdout).toMatch(/learned \d+\/2s from 429s, configured 25\/2s/);
      expect(status.stdout).toMatch(/\d+ answered 429/);
      // The dashboard's controls page shows them too (it reads the same collectLimits).
      const app = await buildDashboard(h.ctx, { bullBoard: false });
      try {
        const page = await authed(app, { url: '/controls?org=acme' });
        expect(page.statusCode).toBe(200);
        expect(page.body).toMatch(/<td data-learned title="learned \d+ at [^"]+">\d+\/2s<\/td>/);
        expect(page.body).toMatch(/<td data-rate-limited>\d+<\/td>/);
      } finally {
        await app.close();
      }
    },
  );

  it(
    'against a service that matches the configuration: nothing learned, no 429',
    { timeout: 60_000 },
    async () => {
      const { h, ids, patches } = await runTwoWorkers(
        {
          learners: 500,
          faults: { latencyAfterMs: [10, 60] },
          limits: {
            perToken: { max: 25, windowMs: TOKEN_WINDOW_MS },
            perOrg: { max: 60, windowMs: 4000 },
            window: 'rolling',
          },
        },
        200,
      );
      await expectAllMovedOnce(h, ids);
      expect(patches.filter((r) => r.status === 429)).toEqual([]);
      expect(patches).toHaveLength(ids.length);
      const policy = await h.ctx.redis.hgetall(h.ctx.keys.policy('acme'));
      expect(Object.keys(policy).filter((f) => /^(learned:|429:|refuted:)/.test(f))).toEqual([]);
    },
  );
});
