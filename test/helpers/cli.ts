// Runs the CLI: in this process through run() (runCommand), as most tests do, or as a real process
// (runCli, spawnCli), for what only a process has: signals, SIGKILL and SIGSTOP, the binary's own exit
// codes, the demo, and workers a test kills. Under vitest the process runs the sources compiled once for
// the run (cli-build.ts), the entry bin/learner-transfer.js runs in an installed image; elsewhere the
// binary itself.
import { spawn, type ChildProcess } from 'node:child_process';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { NO_PERSISTENCE_WARNING } from '../../src/redis/client.ts';
import { run } from '../../src/cli/run.ts';
import { track } from './children.ts';

export const ROOT = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
export const BIN = join(ROOT, 'bin', 'learner-transfer.js');
/**
 * What spawnCli runs: under vitest, the CLI compiled once for the run (cli-build.ts: the same sources as
 * JavaScript, half the start-up CPU of tsx); anywhere else, the binary.
 */
export const SPAWNED = process.env.LT_TEST_CLI ?? BIN;

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * What every CLI a test runs gets unless the test says otherwise: no pacing (LIMIT_BURST=off), so tests of
 * other things keep the timing of the windows alone; the tests of pacing set LIMIT_BURST themselves.
 */
export const TEST_DEFAULTS: Readonly<Record<string, string>> = { LIMIT_BURST: 'off' };

export type SpawnedNode = ChildProcess & { output: { stdout: string; stderr: string } };

/** `node ARGS` with exactly `env`, its output collected (waitExit resolves with it), stopped after the test. */
export function spawnNode(args: string[], env: Record<string, string>, cwd = ROOT): SpawnedNode {
  const child = spawn(process.execPath, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] }) as SpawnedNode;
  child.output = { stdout: '', stderr: '' };
  // A test that fails or times out must not leave a CLI running (its workers would take other jobs).
  track(child);
  child.stdout?.on('data', (d: Buffer) => (child.output.stdout += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (child.output.stderr += d.toString()));
  return child;
}

export function spawnCli(args: string[], env: Record<string, string>, cwd = ROOT): SpawnedNode {
  return spawnNode(
    [SPAWNED, ...args],
    { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...TEST_DEFAULTS, ...env },
    cwd,
  );
}

export function waitExit(
  child: ChildProcess & { output: { stdout: string; stderr: string } },
  timeoutMs = 60_000,
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    // Exited already (while the caller awaited another child): its 'exit' event is gone.
    if (child.exitCode !== null || child.signalCode !== null) {
      setImmediate(() => resolve({ code: child.exitCode, signal: child.signalCode, ...child.output }));
      return;
    }
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new Error(`CLI did not exit within ${timeoutMs} ms; stderr:\n${child.output.stderr.slice(-2000)}`),
      );
    }, timeoutMs);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      // Let the pipes drain.
      setImmediate(() => resolve({ code, signal, ...child.output }));
    });
  });
}

export async function runCli(
  args: string[],
  env: Record<string, string>,
  timeoutMs = 60_000,
  cwd = ROOT,
): Promise<CliResult> {
  return waitExit(spawnCli(args, env, cwd), timeoutMs);
}

/** A stream that keeps what is written to it. */
function capture(): Writable & { text: string } {
  const stream = new Writable({
    write(chunk: Buffer | string, _encoding, callback) {
      stream.text += chunk.toString();
      callback();
    },
  }) as Writable & { text: string };
  stream.text = '';
  return stream;
}

/**
 * Runs a command in this process, as runCli runs the binary: the same environment (PATH and HOME, and
 * `env`), the same result. It never exits the process and gets no signal; it cannot change the working
 * directory, so a test that needs another one spawns the binary.
 */
export async function runCommand(
  args: string[],
  env: Record<string, string>,
  timeoutMs = 60_000,
): Promise<CliResult> {
  const stdout = capture();
  const stderr = capture();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(new Error(`command did not end within ${timeoutMs} ms; stderr:\n${stderr.text.slice(-2000)}`)),
      timeoutMs,
    );
  });
  try {
    const code = await Promise.race([
      run(args, {
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...TEST_DEFAULTS, ...env },
        stdout,
        stderr,
      }),
      timeout,
    ]);
    return { code, signal: null, stdout: stdout.text, stderr: stderr.text };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * A command's stderr without the start-up warning of a Redis that keeps nothing on disk: the tests' shared
 * Redis usually is one, and a test of what a command itself says must not depend on how it is run.
 */
export function withoutNoPersistenceWarning(stderr: string): string {
  return stderr
    .split('\n')
    .filter((line) => !line.includes(NO_PERSISTENCE_WARNING))
    .join('\n');
}

/**
 * Runs the binary at a real terminal: under `script` (util-linux), which gives it a pseudo-terminal for
 * stdin, stdout and stderr, as a person's shell does. What it wrote to the terminal (stdout and stderr
 * together, lines ending with \r\n) is the result's stdout.
 */
export function runInTerminal(
  args: string[],
  env: Record<string, string>,
  timeoutMs = 60_000,
): Promise<CliResult> {
  const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  const command = [process.execPath, SPAWNED, ...args].map(quote).join(' ');
  const child = spawn('script', ['-qec', command, '/dev/null'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/tmp',
      TERM: 'xterm',
      ...TEST_DEFAULTS,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  }) as ChildProcess & { output: { stdout: string; stderr: string } };
  child.output = { stdout: '', stderr: '' };
  track(child);
  child.stdout?.on('data', (d: Buffer) => (child.output.stdout += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (child.output.stderr += d.toString()));
  return waitExit(child, timeoutMs);
}
