// Every child process a test starts (the CLI, a redis-server of its own), so that none outlives its test
// file. A failed or timed-out test does not reach its own cleanup, and its workers would go on taking jobs
// and writing under a prefix nobody deletes: the setup file (test/helpers/setup-file.ts) kills what is
// left after each file, and the process's exit kills what is left after that.
import type { ChildProcess } from 'node:child_process';

const live = new Set<ChildProcess>();

export function track(child: ChildProcess): void {
  live.add(child);
  child.once('exit', () => live.delete(child));
}

/** SIGKILLs every tracked child still running; returns how many there were. */
export function killLiveChildren(): number {
  const n = live.size;
  for (const child of live) child.kill('SIGKILL');
  live.clear();
  return n;
}

process.once('exit', () => killLiveChildren());
