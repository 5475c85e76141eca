// The ETA's forward simulation of the limiter (acquire.lua): a sliding-window log per token and per
// organization, a pacing bucket (GCRA) per scope when it paces, and the run window. A permit is granted as
// soon as the organization's window and bucket and some token's window and bucket all allow it, inside the
// run window, and leaves each window at its grant time + window + 1 ms. The start is the budget now (a
// peek with its frees). Grants go in batches (step.ts); once the schedule repeats it is leapt over, whole
// periods at a time (leap.ts). Pure: no Redis, no clock. test/model/eta-simulate.model.test.ts holds it to
// the Lua on generated policies; test/unit/eta-simulate-pace.test.ts to a plain reference, permit by permit.
import type { SimInput, SimResult, SimScope } from './input.ts';
import { Sim } from './leap.ts';

export type { Frees, PacedScope, SimInput, SimPace, SimResult, SimScope } from './input.ts';

/** A scope without a bucket: with no bucket and no run window, nothing else can hold the work back. */
type Unpaced = SimScope & { pace?: undefined };

export function simulate(
  input: SimInput & { org: Unpaced; tokens: readonly Unpaced[]; open?: undefined },
): SimResult & {
  boundBy: 'org' | 'token' | 'none';
};
export function simulate(input: SimInput): SimResult;
export function simulate(input: SimInput): SimResult {
  if (input.remaining <= 0)
    return { finishMs: 0, waited: { org: 0, token: 0, pace: 0, closed: 0 }, boundBy: 'none', steps: 0 };
  const sim = new Sim(input);
  try {
    return sim.run();
  } finally {
    sim.history.done();
  }
}
