// Test-only fault hook: LT_FAULT_KILL_AT=<step>[:N] kills this process with SIGKILL at the N-th time it
// reaches that step (default the first), so tests can prove that a crash at any step loses nothing.
// Steps: after-spool, after-finish (the worker, after a response), after-mark (the producer, after
// marking learners queued and before adding their jobs). Unset in production: every call is a no-op.
export type FaultStep = 'after-spool' | 'after-finish' | 'after-mark';

const spec = process.env.LT_FAULT_KILL_AT;
const [at, nth] = (spec ?? '').split(':');
let left = Number(nth ?? 1) || 1;

export function faultPoint(step: FaultStep): void {
  if (!spec || step !== at) return;
  if (--left !== 0) return;
  process.stderr.write(`LT_FAULT_KILL_AT: SIGKILL at ${step}\n`);
  process.kill(process.pid, 'SIGKILL');
  // The signal may take a moment to land: run nothing more (no other job, no other write) meanwhile.
  for (;;) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1000);
}
