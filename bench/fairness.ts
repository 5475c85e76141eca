// 200 organizations with work at once, one token each at 10/5s, each organization at 10/10s, one `work`
// process under the default connection cap: the share of its limits each organization gets over the span,
// and how long after the first transfer of any the last organization's first transfer came (the goal:
// 0.9 or more, and within 2 s). test/alone/fairness.test.ts asserts the shares; the spread is a time, so
// it is a figure here. BENCH_FAIR_ORGS (200) and BENCH_FAIR_SPAN_S (60) change the shape.
import { spawnCli, waitExit } from '../test/helpers/cli.ts';
import { startHarness } from '../test/helpers/pipeline.ts';
import { learnersFor, world } from '../test/helpers/schools.ts';
import { newRunId } from '../src/outcomes/runs.ts';
import { isMain, printFigures, round, type Figures } from './common.ts';

export async function runFairnessBench(): Promise<Figures> {
  const n = Number(process.env.BENCH_FAIR_ORGS ?? 200);
  const spanMs = Number(process.env.BENCH_FAIR_SPAN_S ?? 60) * 1000;
  const windows = Math.ceil(spanMs / 10_000);
  const perOrg = windows * 10 + 10;
  const organizations = world(n);
  const tokens = organizations.slice(1).map((o) => ({ org: o.key, token: `sim-${o.key}-1` }));
  const h = await startHarness({
    tag: 'bench-fair',
    sim: {
      organizations,
      learners: (n + 1) * perOrg + 10,
      tokens,
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
  try {
    const runId = newRunId();
    const orgs = tokens.map((t) => t.org);
    await h.ctx.runs.create({ id: runId, kind: 'csv', source: 'fair.csv', orgs });
    for (const [i, org] of orgs.entries()) {
      const ids = learnersFor(organizations, i + 1, perOrg, perOrg);
      await h.ctx.producer.add(
        ids.map((learnerId) => ({ org, learnerId, source: 'fair.csv' })),
        runId,
      );
    }
    const work = spawnCli(['work'], { ...h.env, CONCURRENCY: '10' });
    const counted = () => h.sim.record.filter((r) => r.method === 'PATCH' && r.countedAt !== undefined);
    while (counted().length === 0) await new Promise((r) => setTimeout(r, 20));
    const t0 = counted()[0]?.countedAt as number;
    await new Promise((r) => setTimeout(r, t0 + spanMs + 500 - Date.now()));
    work.kill('SIGTERM');
    await waitExit(work, 30_000);
    const calls = counted().filter((r) => (r.countedAt as number) < t0 + spanMs);
    const per = new Map<string, number>();
    const first = new Map<string, number>();
    for (const r of calls) {
      const org = r.org as string;
      per.set(org, (per.get(org) ?? 0) + 1);
      if (!first.has(org)) first.set(org, r.countedAt as number);
    }
    const allowed = windows * 10;
    const shares = orgs.map((o) => (per.get(o) ?? 0) / allowed);
    return {
      organizations: n,
      'span (s)': spanMs / 1000,
      'transfers in the span': calls.length,
      'lowest share of its limits (goal >= 0.9)': round(Math.min(...shares)),
      'highest share of its limits': round(Math.max(...shares)),
      'last first transfer after the first (ms, goal <= 2000)': Math.max(
        ...orgs.map((o) => (first.get(o) ?? Infinity) - t0),
      ),
      '429s': h.sim.record.filter((r) => r.status === 429).length,
    };
  } finally {
    await h.close();
  }
}

if (isMain(import.meta.url)) {
  printFigures('organizations at once, one work process, default connection cap', await runFairnessBench());
}
