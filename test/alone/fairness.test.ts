// 200 organizations with work at once, one token each at 10/5s, each organization at 10/10s, served by one
// `work` under the default connection cap (32: at most 29 queue workers attached): over 60 s each
// organization gets 0.9 or more of what its limits allow, counted from the simulator's record of the calls
// it counted. How soon every organization's first transfer comes is a time: bench/fairness.ts gives it
// (the goal: within 2 s of the first of any), and this test prints it. What it asserts depends on the
// machine's cores being free, so it runs alone, after the other files (vitest.config.ts, 'alone').
import { describe, afterAll, beforeAll, expect, it } from 'vitest';
import { newRunId } from '../../src/outcomes/runs.ts';
import { spawnCli, waitExit } from '../helpers/cli.ts';
import { startHarness, type Harness } from '../helpers/pipeline.ts';
import { learnersFor, world } from '../helpers/schools.ts';
import { waitFor } from '../helpers/wait.ts';

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

  it('gives every organization 0.9 or more of its limits over 60 s', async () => {
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
    const counts = orgs.map((org) => perOrg.get(org) ?? 0);
    console.log(
      `fairness: ${calls.length} transfers in ${SPAN_MS / 1000} s; per organization ${Math.min(...counts)} to ` +
        `${Math.max(...counts)} of ${allowed}; the last first transfer ` +
        `${Math.max(...[...first.values()].map((t) => t - start))} ms after the first`,
    );
    expect(short, 'organizations under 0.9 of their limits').toEqual([]);
    expect(h.sim.record.filter((r) => r.result === 'rate-limited')).toEqual([]);
    expect(h.sim.violations()).toEqual([]);
  }, 180_000);
});
