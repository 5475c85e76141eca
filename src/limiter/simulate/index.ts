// The ETA's forward simulation of the limiter (acquire.lua's rules; docs/eta.md): grants in
// batches (step.ts), repeating periods leapt over (leap.ts). Pure: no Redis, no clock. Held to
// the Lua by test/model/eta-simulate.model.test.ts, to a plain reference by
// test/unit/eta-simulate-pace.test.ts.
import type { SimInput, SimResult, SimScope } from './input.ts';
import { Sim } from './leap.ts';
import { waitedBy } from './step.ts';

export type {
  Frees,
  PacedScope,
  SharedScope,
  SimBound,
  SimInput,
  SimPace,
  SimResult,
  SimScope,
} from './input.ts';

/** A scope without a bucket (with no run window either, nothing else holds the work back). */
type Unpaced = SimScope & { pace?: undefined };

export function simulate(
  input: SimInput & { org: Unpaced; shared?: undefined; tokens: readonly Unpaced[]; open?: undefined },
): SimResult & {
  boundBy: 'org' | 'token' | 'none';
};
export function simulate(input: SimInput): SimResult;
export function simulate(input: SimInput): SimResult {
  if (input.remaining <= 0) return { finishMs: 0, waited: waitedBy([]), boundBy: 'none', steps: 0 };
  const sim = new Sim(input);
  try {
    return sim.run();
  } finally {
    sim.history.done();
  }
}
