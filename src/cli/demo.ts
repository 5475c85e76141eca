import { join } from 'node:path';
import { OUTCOMES, isOutcomeCode } from '../outcomes/codes.ts';
import { exploreCommands, runDemo } from '../demo/run-demo.ts';
import type { Cli } from './io.ts';

/** The demo's flags, as its entry in the command table reads them. */
export interface DemoFlags {
  csv: string;
  limitPerToken: string;
  limitPerOrg: string;
  burst: string;
  out?: string;
  dashboard: boolean;
  dashboardPort: string;
  keep?: boolean;
}

async function runAndShow(
  cli: Cli,
  opts: DemoFlags,
  outDir: string,
  print: (line: string) => void,
  live: (line: string) => void,
  signal: AbortSignal,
): Promise<void> {
  const session = await runDemo({
    csv: opts.csv,
    limitPerToken: opts.limitPerToken,
    limitPerOrg: opts.limitPerOrg,
    burst: opts.burst,
    outDir,
    print,
    live,
    env: cli.env,
    signal,
    keep: opts.keep === true,
  });
  try {
    print('');
    print('outcomes');
    for (const [code, n] of Object.entries(session.final).sort((a, b) => b[1] - a[1])) {
      const why = isOutcomeCode(code) ? OUTCOMES[code].description : code;
      print(`  ${code.padEnd(16)} ${String(n).padStart(4)}  ${why}`);
    }
    print(
      `service   ${session.sim.record.length} requests seen, ${session.tooManyRequests} answered 429, ${session.violations} limit violations`,
    );
    print(`reports   ${session.files.report}`);
    print(`          ${session.files.successes}, ${session.files.failures}, ${session.files.pending}`);
    if (session.enqueue.rejectsFile)
      print(`          ${session.enqueue.rejectsFile} (rows that were not learner ids)`);
    if (opts.keep || opts.dashboard) {
      const when = opts.keep
        ? 'now or after the demo (--keep)'
        : 'while the dashboard is up (--keep leaves the state after Ctrl-C)';
      print(`explore   ${when}, in another terminal:`);
      for (const c of exploreCommands(session.explore, session.runId)) print(`            ${c}`);
    } else {
      print(
        'explore   the state is deleted now: run the demo with --keep to look at it with status, report, audit',
      );
    }
    if (opts.dashboard) {
      const { startDemoDashboard } = await import('../demo/dashboard-hook.ts');
      const dashboard = await startDemoDashboard(session.ctx, Number(opts.dashboardPort));
      print(`dashboard ${dashboard.url} (Ctrl-C to stop)`);
      if (!signal.aborted) {
        await new Promise<void>((resolveStop) => signal.addEventListener('abort', () => resolveStop()));
      }
      await dashboard.close();
    }
  } finally {
    await session.close();
  }
}

export async function demoCommand(cli: Cli, opts: DemoFlags): Promise<void> {
  const tty = Boolean(cli.stdout.isTTY);
  let liveShown = false;
  const print = (line: string) => {
    if (liveShown && tty) cli.stdout.write('\r\x1b[2K');
    liveShown = false;
    cli.print(line);
  };
  let lastPlain = 0;
  const live = (line: string) => {
    if (tty) {
      cli.stdout.write(`\r\x1b[2K${line}`);
      liveShown = true;
    } else if (Date.now() - lastPlain > 2000) {
      lastPlain = Date.now();
      cli.print(line);
    }
  };
  const outDir =
    opts.out ?? join('out', `demo-${new Date().toISOString().replace(/[-:]/g, '').slice(0, 15)}`);
  // One shutdown handler for the whole demo: a signal during the run stops the workers and removes
  // what the demo started; during the dashboard phase it ends the demo.
  const stopping = new AbortController();
  const off = cli.onShutdown(() => stopping.abort(), 30_000);
  try {
    await runAndShow(cli, opts, outDir, print, live, stopping.signal);
  } finally {
    off();
  }
}
