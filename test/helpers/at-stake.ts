// What a fault meets when it falls: the transfer calls the service has received and not yet answered, and
// the learners of the run it has not yet answered for. A fault injected into an idle system proves
// nothing ("nothing lost" passes with nothing at stake), so each chaos scenario takes this snapshot at the
// moment its fault takes effect and asserts that both are there.
import { expect } from 'vitest';
import type { Simulator } from '../../src/simulator/index.ts';
import { callsInFlight } from './in-flight.ts';
import { waitFor } from './wait.ts';

export { callsInFlight };

export interface AtStake {
  /** What fell (for the failure message). */
  fault: string;
  /** Transfer calls received by the service without an answer yet (status 0 in its record). */
  inFlight: number;
  /** Learners of the run the service has not answered a transfer call for yet. */
  pending: number;
  /** When the snapshot was taken (Date.now()). */
  at: number;
}

/** The learners among `ids` the service has not answered a transfer call for. */
export function learnersPending(sim: Simulator, ids: readonly number[]): number {
  const answered = new Set<number>();
  for (const r of sim.record)
    if (r.method === 'PATCH' && r.status !== 0 && r.learnerId !== undefined) answered.add(r.learnerId);
  return ids.filter((id) => !answered.has(id)).length;
}

/** A snapshot of what is at stake now. Take it in the same tick as the fault. */
export function atStake(sim: Simulator, ids: readonly number[], fault: string): AtStake {
  return { fault, inFlight: callsInFlight(sim), pending: learnersPending(sim, ids), at: Date.now() };
}

/** Fails unless the fault met calls in flight and learners still pending. */
export function expectAtStake(s: AtStake, minInFlight = 1): void {
  expect(s.inFlight, `calls in flight when ${s.fault} fell`).toBeGreaterThanOrEqual(minInFlight);
  expect(s.pending, `learners pending when ${s.fault} fell`).toBeGreaterThan(0);
}

/**
 * Waits for a moment with a transfer call in flight and returns the snapshot of that moment: the caller
 * injects its fault next, in the same tick (nothing runs in between: no I/O between the last check and the
 * return). Polls often: under tight limits or short latencies a call is in flight for only milliseconds.
 */
export async function aimAtCallInFlight(
  sim: Simulator,
  ids: readonly number[],
  fault: string,
): Promise<AtStake> {
  await waitFor(
    `a transfer call in flight to aim ${fault} at`,
    () => callsInFlight(sim),
    (n) => n > 0,
    {
      everyMs: 2,
    },
  );
  return atStake(sim, ids, fault);
}
