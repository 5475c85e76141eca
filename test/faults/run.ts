// The standalone seeded fault runner: `npm run faults -- --seeds 1-200` (or `--seeds 7`, `--seeds 3,9,12`).
// One line per seed with its verdict, the full account of every failing one (run, schedule, what each
// event met, the violations, the replay command), a summary; exit 1 when any seed failed.
import { nothingAtStake } from './at-stake.ts';
import { describeReport, replayCommand } from './describe.ts';
import { runSeed, type SeedReport } from './run-seed.ts';
import { parseSeeds } from './seed-list.ts';

const USAGE = 'usage: npm run faults -- --seeds N | N-M | N,M,... [--verbose]';

function line(r: SeedReport): string {
  const ok = r.violations.length === 0;
  const idle = nothingAtStake(r);
  const tally = r.verdict?.outcomes.tally ?? {};
  const moved = (tally.transferred?.length ?? 0) + (tally['already-in-org']?.length ?? 0);
  const kinds = r.schedule.map((e) => `${e.kind}@${(e.at / 1000).toFixed(1)}`).join(' ');
  return (
    `seed ${String(r.seed).padEnd(5)} ${ok ? 'pass' : 'FAIL'}  ${(r.durationMs / 1000).toFixed(1).padStart(5)} s ` +
    `(${Object.values(r.phases)
      .map((s) => s.toFixed(0))
      .join('+')})  ` +
    `done ${moved}/${r.run.ids.length}, ${r.verdict?.outcomes.marked.length ?? 0} possible repeat(s), ` +
    `${r.replayed} replayed, ${r.calls} calls | ${r.run.slots} worker(s): ${kinds}` +
    (ok ? '' : ` | ${r.violations.length} violation(s)`) +
    (idle.length > 0 ? ` | ${idle.length} fault(s) with nothing at stake` : '')
  );
}

async function main(argv: string[]): Promise<number> {
  const i = argv.indexOf('--seeds');
  const spec = i >= 0 ? argv[i + 1] : undefined;
  if (!spec) {
    console.error(USAGE);
    return 2;
  }
  const seeds = parseSeeds(spec);
  const verbose = argv.includes('--verbose');
  const failed: number[] = [];
  let ran = 0;
  const started = Date.now();
  for (const seed of seeds) {
    if (stop.signal.aborted) break;
    const report = await runSeed(seed, { signal: stop.signal });
    // Ctrl-C cut this seed short: it was not judged, so it is neither a pass nor a failure.
    if (stop.signal.aborted) {
      console.log(`seed ${seed} interrupted: not judged`);
      break;
    }
    ran++;
    console.log(line(report));
    for (const p of nothingAtStake(report)) console.log(`  nothing at stake: ${p}`);
    if (report.violations.length > 0) failed.push(seed);
    if (report.violations.length > 0 || verbose) console.log(`${describeReport(report).join('\n')}\n`);
  }
  const minutes = ((Date.now() - started) / 60_000).toFixed(1);
  console.log(
    `${ran} seed(s) in ${minutes} min: ${ran - failed.length} passed, ${failed.length} failed` +
      (ran < seeds.length ? ` (stopped: ${seeds.length - ran} not run)` : '') +
      (failed.length > 0 ? ` (${failed.join(', ')}); replay one with: ${replayCommand(failed[0] ?? 0)}` : ''),
  );
  return failed.length > 0 ? 1 : 0;
}

// Ctrl-C (or SIGTERM): the seed under way stops and cleans up (its processes killed, its directories
// removed), then the runner exits; a second one exits at once (the exit hooks still kill the processes).
const stop = new AbortController();
for (const [signal, code] of [
  ['SIGINT', 130],
  ['SIGTERM', 143],
] as const) {
  process.on(signal, () => {
    if (stop.signal.aborted) process.exit(code);
    stop.abort();
    process.exitCode = code;
  });
}
const code = await main(process.argv.slice(2)).catch((err: unknown) => {
  console.error((err as Error).message);
  return 2;
});
// Exit now: a seed that timed out may have left a timer of its schedule behind (its processes are gone).
process.exit(stop.signal.aborted ? process.exitCode : code);
