// Hunts intermittent failures: runs test files N times, one fresh vitest process after another, with K
// processes burning CPU beside them the whole time, and prints how often each test passed and the first
// failure of each test that did not always pass. docs/testing.md says when a file counts as stable.
//
//   npm run test:repeat -- FILE... --times N [--load K] [-t NAME] [-- VITEST_ARGS...]
//
// Exits 1 if any run failed, 2 on bad arguments. The burners are killed at the end, and on Ctrl-C.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface RepeatOptions {
  files: string[];
  times: number;
  load: number;
  testName?: string;
  /** Passed to vitest as they are (after a second `--`). */
  vitestArgs: string[];
}

const USAGE = 'usage: npm run test:repeat -- FILE... --times N [--load K] [-t NAME] [-- VITEST_ARGS...]';

function count(flag: string, raw: string | undefined, min: number): number {
  const n = Number(raw);
  if (raw === undefined || !/^\d+$/.test(raw) || n < min)
    throw new Error(`${flag}: expected a whole number >= ${min}, got ${JSON.stringify(raw ?? '')}\n${USAGE}`);
  return n;
}

/** Reads the command line (without node and the script). Throws naming the flag that is wrong. */
export function parseArgs(argv: readonly string[]): RepeatOptions {
  const files: string[] = [];
  let times: number | undefined;
  let load = 0;
  let testName: string | undefined;
  let vitestArgs: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '--') {
      vitestArgs = argv.slice(i + 1);
      break;
    }
    if (a === '--times') times = count('--times', argv[++i], 1);
    else if (a === '--load') load = count('--load', argv[++i], 0);
    else if (a === '-t' || a === '--testNamePattern') {
      testName = argv[++i];
      if (!testName) throw new Error(`${a}: expected a test name\n${USAGE}`);
    } else if (a.startsWith('-')) throw new Error(`unknown flag ${a}\n${USAGE}`);
    else files.push(a);
  }
  if (files.length === 0) throw new Error(`no test file given\n${USAGE}`);
  if (times === undefined) throw new Error(`--times is required\n${USAGE}`);
  return { files, times, load, testName, vitestArgs };
}

/** One test's result in one run, as vitest's JSON reporter gives it. */
interface Assertion {
  fullName: string;
  status: string;
  failureMessages?: string[];
}
interface FileResult {
  name: string;
  status: string;
  message?: string;
  assertionResults: Assertion[];
}
interface JsonReport {
  testResults?: FileResult[];
}

export interface Tally {
  /** Test name -> runs it passed, runs it ran, and the first failure seen. */
  tests: Map<string, { passed: number; ran: number; firstFailure?: string }>;
  runs: number;
  failedRuns: number;
}

export function newTally(): Tally {
  return { tests: new Map(), runs: 0, failedRuns: 0 };
}

/**
 * Adds one run to the tally. A file that failed outside its tests (an import error, a hook) counts as
 * a failed test named after the file; a run with no report at all (vitest crashed) as one named `(run)`.
 * Returns a line for each test that failed in this run.
 */
export function addRun(
  tally: Tally,
  report: JsonReport | undefined,
  exitCode: number,
  output: string,
): string[] {
  tally.runs++;
  let failed = exitCode !== 0;
  const failing: string[] = [];
  const note = (name: string, ok: boolean, failure: string | undefined) => {
    const t = tally.tests.get(name) ?? { passed: 0, ran: 0 };
    t.ran++;
    if (ok) t.passed++;
    else {
      failed = true;
      t.firstFailure ??= failure ?? '(no message)';
      failing.push(`${name}: ${(failure ?? '(no message)').split('\n')[0]?.slice(0, 200)}`);
    }
    tally.tests.set(name, t);
  };
  if (!report?.testResults) note('(run)', false, `no JSON report; vitest exited ${exitCode}\n${output}`);
  for (const file of report?.testResults ?? []) {
    for (const a of file.assertionResults) {
      if (a.status === 'skipped' || a.status === 'pending' || a.status === 'todo') continue;
      note(a.fullName, a.status === 'passed', a.failureMessages?.join('\n'));
    }
    if (file.status === 'failed' && file.message)
      note(`${file.name} (outside its tests)`, false, file.message);
  }
  if (failed) tally.failedRuns++;
  return failing;
}

/** The summary: one line per test (failing tests first), then each failing test's first failure. */
export function summary(tally: Tally, maxLines = 60): string {
  const rows = [...tally.tests].sort((a, b) => a[1].passed / a[1].ran - b[1].passed / b[1].ran);
  const out = rows.map(([name, t]) => `${t.passed}/${t.ran} ${name}`);
  for (const [name, t] of rows) {
    if (!t.firstFailure) continue;
    const lines = t.firstFailure.split('\n');
    const shown = lines.slice(0, maxLines).join('\n');
    const more = lines.length > maxLines ? `\n... (${lines.length - maxLines} more lines)` : '';
    out.push('', `first failure of "${name}" (passed ${t.passed}/${t.ran}):`, shown + more);
  }
  out.push('', `${tally.runs - tally.failedRuns}/${tally.runs} runs passed`);
  return out.join('\n');
}

/** K processes that each keep one core busy until killed. */
function startBurners(k: number): ChildProcess[] {
  return Array.from({ length: k }, () => spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }));
}

function vitestRun(o: RepeatOptions, outFile: string, children: Set<ChildProcess>) {
  const vitest = join(import.meta.dirname, '..', 'node_modules', 'vitest', 'vitest.mjs');
  const args = [vitest, 'run', ...o.files, '--reporter=json', `--outputFile=${outFile}`];
  if (o.testName) args.push('-t', o.testName);
  args.push(...o.vitestArgs);
  return new Promise<{ code: number; output: string }>((resolve) => {
    // A process group of its own: a stop kills vitest with its workers and everything they started.
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    children.add(child);
    let output = '';
    const keep = (b: Buffer) => {
      // eslint-disable-next-line no-control-regex
      output = (output + b.toString().replace(/\x1b\[[0-9;]*m/g, '')).slice(-20_000);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    child.on('close', (code, signal) => {
      children.delete(child);
      resolve({ code: code ?? (signal ? 128 : 1), output });
    });
  });
}

function readReport(file: string): JsonReport | undefined {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as JsonReport;
  } catch {
    return undefined;
  }
}

/** Runs everything and returns the exit code. */
export async function repeat(o: RepeatOptions, log: (line: string) => void = console.log): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'lt-repeat-'));
  const children = new Set<ChildProcess>();
  const burners = startBurners(o.load);
  const stop = () => {
    for (const c of burners) c.kill('SIGKILL');
    for (const c of children) {
      try {
        process.kill(-(c.pid as number), 'SIGKILL');
      } catch {
        // already gone
      }
    }
  };
  const onSignal = (signal: NodeJS.Signals) => {
    stop();
    rmSync(dir, { recursive: true, force: true });
    process.exit(signal === 'SIGINT' ? 130 : 143);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  if (o.load > 0) log(`burners: ${burners.map((b) => b.pid).join(' ')}`);
  const tally = newTally();
  try {
    for (let i = 1; i <= o.times; i++) {
      const started = Date.now();
      const outFile = join(dir, `run-${i}.json`);
      const { code, output } = await vitestRun(o, outFile, children);
      const failing = addRun(tally, readReport(outFile), code, output);
      const s = ((Date.now() - started) / 1000).toFixed(1);
      log(`run ${i}/${o.times}: ${code === 0 ? 'passed' : `FAILED (exit ${code})`} in ${s} s`);
      for (const line of failing) log(`  ${line}`);
    }
  } finally {
    stop();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    rmSync(dir, { recursive: true, force: true });
  }
  log('');
  log(summary(tally));
  return tally.failedRuns > 0 ? 1 : 0;
}

if (process.argv[1] === import.meta.filename) {
  let options: RepeatOptions;
  try {
    options = parseArgs(process.argv.slice(2));
  } catch (e) {
    console.error((e as Error).message);
    process.exit(2);
  }
  process.exitCode = await repeat(options);
}
