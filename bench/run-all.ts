// `npm run bench`: every benchmark in one run, one table. Each figure that has a baseline is a ratio
// against it, measured in the same run on the same machine. BENCH_ONLY=limiter,enqueue runs a subset;
// BENCH_ROWS, BENCH_TRANSFERS, BENCH_ORGS (orgs and orgs-closed) and the load benchmark's own variables
// scale them down.
import { cpus, totalmem } from 'node:os';
import { isMain, type Figures } from './common.ts';

type Bench = { name: string; run: () => Promise<Figures> };

const BENCHES: Bench[] = [
  { name: 'limiter', run: async () => (await import('./limiter.ts')).runLimiterBench() },
  { name: 'enqueue', run: async () => (await import('./enqueue.ts')).runEnqueueBench() },
  { name: 'transfers', run: async () => (await import('./transfers.ts')).runTransfersBench() },
  { name: 'crawl', run: async () => (await import('./crawl.ts')).runCrawlBench() },
  { name: 'dashboard', run: async () => (await import('./dashboard.ts')).runDashboardBench() },
  { name: 'load', run: async () => (await import('./load.ts')).runLoadBench() },
  { name: 'orgs', run: async () => (await import('./orgs.ts')).runOrgsBench() },
  { name: 'orgs-closed', run: async () => (await import('./orgs-closed.ts')).runOrgsClosedBench() },
  { name: 'fairness', run: async () => (await import('./fairness.ts')).runFairnessBench() },
  { name: 'audit-archive', run: async () => (await import('./audit-archive.ts')).runAuditArchiveBench() },
  { name: 'redis-bytes', run: async () => (await import('./redis-bytes.ts')).runRedisBytesBench() },
  { name: 'eta', run: async () => (await import('./eta.ts')).runEtaBench() },
  { name: 'pacing', run: async () => (await import('./pacing.ts')).runPacingBench() },
  { name: 'cli-start', run: async () => (await import('./cli-start.ts')).runCliStartBench() },
];

export async function runAll(only?: string[]): Promise<{ name: string; figures: Figures }[]> {
  const out: { name: string; figures: Figures }[] = [];
  for (const b of BENCHES) {
    if (only && !only.includes(b.name)) continue;
    const started = Date.now();
    process.stderr.write(`bench ${b.name} ...\n`);
    const figures = await b.run();
    figures['(bench wall time s)'] = Math.round((Date.now() - started) / 100) / 10;
    out.push({ name: b.name, figures });
  }
  return out;
}

export function markdownTable(results: { name: string; figures: Figures }[]): string {
  const lines = ['| benchmark | figure | value |', '|---|---|---|'];
  for (const r of results)
    for (const [k, v] of Object.entries(r.figures)) lines.push(`| ${r.name} | ${k} | ${v} |`);
  return lines.join('\n');
}

if (isMain(import.meta.url)) {
  const only = process.env.BENCH_ONLY?.split(',').map((s) => s.trim());
  const results = await runAll(only);
  console.log(
    `machine: ${cpus().length} x ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, node ${process.version}`,
  );
  console.log(markdownTable(results));
}
