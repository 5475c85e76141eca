// Test-only fault hook: LT_FAULT_KILL_AT=<step>[:N] SIGKILLs this process the N-th time it
// reaches a step (after-spool, after-finish, after-mark), so tests prove a crash loses nothing.
// Unset: a no-op.
export type FaultStep = 'after-spool' | 'after-finish' | 'after-mark';

const spec = process.env.LT_FAULT_KILL_AT;
const [at, nth] = (spec ?? '').split(':');
let left = Number(nth ?? 1) || 1;

export function faultPoint(step: FaultStep): void {
  if (!spec || step !== at) return;
  if (--left !== 0) return;
  process.stderr.write(`LT_FAULT_KILL_AT: SIGKILL at ${step}\n`);
  process.kill(process.pid, 'SIGKILL');
  // The signal may take a moment to land: run nothing more meanwhile.
  for (;;) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1000);
}
