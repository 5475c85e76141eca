// Many organizations with work at once, one token each at 10/5s, each organization at 10/10s, one `work`
// process under the default connection cap: the share of its limits each organization gets over the span,
// and how long after the first transfer of any the last organization's first transfer came (the goal:
// 0.9 or more, and within 2 s). test/e2e/fairness.test.ts asserts that they are even; the spread is a time, so
// it is a figure here. BENCH_FAIR_ORGS (200) and BENCH_FAIR_SPAN_S (60) change the shape.
import { fairWorld, runFairSpan } from '../test/helpers/fairness.ts';
import { isMain, printFigures, round, type Figures } from './common.ts';

export async function runFairnessBench(): Promise<Figures> {
  const n = Number(process.env.BENCH_FAIR_ORGS ?? 200);
  const w = await fairWorld(n, Number(process.env.BENCH_FAIR_SPAN_S ?? 60) * 1000, 'bench-fair');
  try {
    const span = await runFairSpan(w);
    const shares = w.orgs.map((o) => (span.perOrg.get(o) ?? 0) / w.allowed);
    return {
      organizations: n,
      'span (s)': w.spanMs / 1000,
      'transfers in the span': span.calls.length,
      'lowest share of its limits (goal >= 0.9)': round(Math.min(...shares)),
      'highest share of its limits': round(Math.max(...shares)),
      'last first transfer after the first (ms, goal <= 2000)': Math.max(
        ...w.orgs.map((o) => span.firstAfter.get(o) ?? Infinity),
      ),
      '429s': w.h.sim.record.filter((r) => r.status === 429).length,
    };
  } finally {
    await w.h.close();
  }
}

if (isMain(import.meta.url)) {
  printFigures('organizations at once, one work process, default connection cap', await runFairnessBench());
}
