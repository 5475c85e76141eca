// The check every chaos test ends with: from the simulator's request record and the outcome store, every
// learner is in exactly one known state, agrees with what the service did to it, and changed owner at
// most once. Returns the learners per bucket for the test's own assertions. The rules themselves are in
// ledger-check.ts (as violations, shared with the seeded fault runner); this asserts there are none.
import { expect } from 'vitest';
import type { AppContext } from '../../src/app/context.ts';
import type { Simulator } from '../../src/simulator/index.ts';
import { checkLedger, type LedgerExpectation, type Tally } from './ledger-check.ts';

export type { LedgerExpectation, Tally } from './ledger-check.ts';

export async function expectLedger(ctx: AppContext, sim: Simulator, exp: LedgerExpectation): Promise<Tally> {
  const { violations, tally } = await checkLedger(ctx, sim, exp);
  expect(violations, `the ledger of '${exp.org}'`).toEqual([]);
  return tally;
}
