// Calls in flight at the simulator, for the chaos tests (at-stake.ts) and the seeded fault runner, which
// runs outside vitest and so imports nothing that imports it.
import type { Simulator } from '../../src/simulator/index.ts';

/** Transfer calls the service has received and not yet answered or reset. */
export function callsInFlight(sim: Simulator): number {
  let n = 0;
  for (const r of sim.record) if (r.method === 'PATCH' && r.status === 0) n++;
  return n;
}
