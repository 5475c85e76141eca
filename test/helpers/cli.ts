// Runs the real CLI (bin/learner-transfer.js) as a child process, for tests of exit codes, output and
// process-level faults (SIGKILL).
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { NO_PERSISTENCE_WARNING } from '../../src/redis/client.ts';

export const ROOT = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
export const BIN = join(ROOT, 'bin', 'learner-transfer.js');

// A test that times out must not leave a CLI running (a demo's workers would take other tests' jobs).
const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export function spawnCli(
  args: string[],
  env: Record<string, string>,
  cwd = ROOT,
): ChildProcess & { output: { stdout: string; stderr: string } } {
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  }) as ChildProcess & { output: { stdout: string; stderr: string } };
  child.output = { stdout: '', stderr: '' };
  live.add(child);
  child.once('exit', () => live.delete(child));
  child.stdout?.on('data', (d: Buffer) => (child.output.stdout += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (child.output.stderr += d.toString()));
  return child;
}

export function waitExit(
  child: ChildProcess & { output: { stdout: string; stderr: string } },
  timeoutMs = 60_000,
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
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
