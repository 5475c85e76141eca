// The check every chaos test ends with: from the simulator's request record and the outcome store, every
// learner is in exactly one known state, agrees with what the service did to it, and changed owner at
// most once. Returns the learners per bucket for the test's own assertions. The rules themselves are in
// outcomes-check-core.ts (as violations, shared with the seeded fault runner); this asserts there are none.
import { expect } from 'vitest';
import type { AppContext } from '../../src/app/context.ts';
import type { Simulator } from '../../src/simulator/index.ts';
import { checkOutcomes, type OutcomeExpectation, type Tally } from './outcomes-check-core.ts';

export type { OutcomeExpectation, Tally } from './outcomes-check-core.ts';

export async function expectOutcomes(
  ctx: AppContext,
  sim: Simulator,
  exp: OutcomeExpectation,
): Promise<Tally> {
  const { violations, tally } = await checkOutcomes(ctx, sim, exp);
  expect(violations, `the outcome store of '${exp.org}'`).toEqual([]);
  return tally;
}
