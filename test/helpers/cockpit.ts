// A migration in its second day, for the cockpit's browser test and the screenshots script: three
// organizations on the real pipeline (Redis under a random prefix, the simulator, real workers) at the
// house's real limits (100 per hour per token, 1,000 per day per organization).
// - acme: a run of 3,000 learners; the workers spend both tokens' hour (200 calls), three of them are
//   forbidden (403); the rest waits, so its finish is days away.
// - beta: paced, with a run window that is closed now, a run of 40 waiting, and five learners held by the
//   pre-flight check (3 unknown, 2 no-user), recorded as `plan --check --apply` records them.
// - gamma: a run of 20, all transferred.
// With `history`, acme's run began `history` hours ago and that many hours of finished learners are
// recorded as the workers would have (the store's records and the hourly records, at those past times),
// so the burn-down has a past to show: the screenshots use it; the browser test does not need it.
import { countHourly, HOUR_MS } from '../../src/outcomes/hourly.ts';
import { newRunId } from '../../src/outcomes/runs.ts';
import { setLimits } from '../../src/limiter/policy-control.ts';
import { DEFAULT_TOKENS } from '../../src/simulator/defaults.ts';
import { startWorkers } from '../../src/worker/run-workers.ts';
import { DASHBOARD_TOKEN } from './dashboard.ts';
import { learnersNotIn, startHarness, type Harness } from './pipeline.ts';
import { waitFor } from './wait.ts';

export const COCKPIT_FORBIDDEN = [2, 3, 5];
export const ACME_RUN = 3000;

export interface Cockpit {
  h: Harness;
  runs: { acme: string; beta: string; gamma: string };
  close(): Promise<void>;
}

/** A run window that opened two hours ago and closed an hour ago (UTC): closed now, opens tomorrow. */
function closedWindow(now: number): string {
  const hhmm = (ms: number) => new Date(ms).toISOString().slice(11, 16);
  return `all ${hhmm(now - 2 * HOUR_MS)}-${hhmm(now - HOUR_MS)}`;
}

async function recordPast(h: Harness, org: string, runId: string, ids: readonly number[], at: number) {
  const { store, redis, keys } = h.ctx;
  await store.markQueued(
    ids.map((learnerId) => ({ org, learnerId, runId, source: 'cohort.csv', force: false })),
    at,
  );
  for (const learnerId of ids) {
    await store.finish({
      org,
      learnerId,
      runId,
      at,
      attemptId: `seed:${runId}:${learnerId}`,
      update: { b: 'transferred', c: 'transferred', m: 'transferred (seeded history)', d: 180, n: 1 },
    });
    await countHourly(redis, keys, org, 'transferred', at, { finalByRun: { [runId]: 1 } });
  }
}

async function held(h: Harness, org: string, runId: string, ids: readonly number[], cls: string) {
  const at = Date.now();
  await h.ctx.store.markQueued(
    ids.map((learnerId) => ({ org, learnerId, runId, source: 'list:seed', force: false })),
    at,
  );
  for (const learnerId of ids) {
    await h.ctx.store.finish({
      org,
      learnerId,
      runId,
      at,
      attemptId: `check:${runId}:${learnerId}`,
      update: { b: 'held', c: 'held', m: `${cls}: held by the pre-flight check`, d: 0, n: 0 },
    });
  }
}

export async function cockpitScenario(options: { history?: number } = {}): Promise<Cockpit> {
  const history = options.history ?? 0;
  const h = await startHarness({
    tag: 'cockpit',
    sim: {
      learners: 5000,
      forbiddenLearnerIds: COCKPIT_FORBIDDEN,
      tokens: [...DEFAULT_TOKENS, { token: 'sim-gamma-1', org: 'gamma' }],
    },
    env: {
      LEARNER_API_TOKENS: 'acme:sim-acme-1,acme:sim-acme-2,beta:sim-beta-1,gamma:sim-gamma-1',
      LIMIT_PER_TOKEN: '100/1h',
      LIMIT_PER_ORG: '1000/1d',
      ATTEMPTS: '2',
      DASHBOARD_TOKEN,
    },
  });
  const now = Date.now();
  const fallback = { limitPerToken: h.config.limitPerToken, limitPerOrg: h.config.limitPerOrg };
  await setLimits(
    h.ctx.redis,
    h.ctx.keys,
    'beta',
    { burst: { count: 10 }, runWindow: { windows: closedWindow(now), tz: 'Europe/Berlin' } },
    fallback,
    'operator@cockpit',
  );

  const runs = { acme: newRunId(), beta: newRunId(), gamma: newRunId() };
  const started = new Date(now - history * HOUR_MS - 20 * 60_000);
  await h.ctx.runs.create({ id: runs.acme, kind: 'csv', source: 'acme-cohort.csv', orgs: ['acme'] }, started);
  await h.ctx.runs.create({ id: runs.beta, kind: 'csv', source: 'beta.csv', orgs: ['beta'] });
  await h.ctx.runs.create({ id: runs.gamma, kind: 'csv', source: 'gamma.csv', orgs: ['gamma'] });

  const acmeIds = [...COCKPIT_FORBIDDEN, ...learnersNotIn('acme', ACME_RUN + 5, 6).slice(0, ACME_RUN - 3)];
  // The history: a steady 40 an hour over the past hours, the rate the day's budget allows.
  const past = acmeIds.slice(ACME_RUN - history * 40);
  for (let k = history; k >= 1; k--) {
    const slice = past.slice((history - k) * 40, (history - k + 1) * 40);
    await recordPast(h, 'acme', runs.acme, slice, now - k * HOUR_MS + 10 * 60_000);
  }
  const pastSet = new Set(past);
  const item = (org: string) => (learnerId: number) => ({ org, learnerId, source: `${org}.csv` });
  await h.ctx.producer.add(acmeIds.filter((id) => !pastSet.has(id)).map(item('acme')), runs.acme);
  await h.ctx.producer.add(learnersNotIn('beta', 40, 4000).map(item('beta')), runs.beta);
  await held(h, 'beta', runs.beta, [4901, 4902, 4903], 'unknown');
  await held(h, 'beta', runs.beta, [4904, 4905], 'no-user');
  await h.ctx.producer.add(learnersNotIn('gamma', 20, 4500).map(item('gamma')), runs.gamma);

  // The workers spend acme's hour (2 tokens x 100) and finish gamma; beta's window is closed.
  const workers = startWorkers(h.ctx, { orgs: ['acme', 'beta', 'gamma'], concurrency: 10, untilIdle: false });
  const finalOf = async (org: string) => {
    const c = await h.ctx.redis.hgetall(h.ctx.keys.orgCounts(org));
    return Object.entries(c)
      .filter(([b]) => b !== 'queued' && b !== 'retrying')
      .reduce((a, [, n]) => a + Number(n), 0);
  };
  await waitFor(
    "acme to spend its tokens' hour and gamma to finish (final learners of acme, gamma)",
    async () => [await finalOf('acme'), await finalOf('gamma')],
    ([a, g]) => (a ?? 0) >= 200 + past.length && (g ?? 0) >= 20,
    { timeoutMs: 90_000, everyMs: 100 },
  );
  await workers.stop();
  return { h, runs, close: () => h.close() };
}
