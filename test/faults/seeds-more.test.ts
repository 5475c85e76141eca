// The other two of the suite's four fixed fault seeds (seeds.test.ts runs the first two and says what a
// seed's run is): a file of their own so that they run beside the first two.
import { describe } from 'vitest';
import { CI_SEEDS, fixedSeedTests } from './fixed-seeds.ts';

describe('fixed seeds: every invariant holds, and every fault had something at stake', () => {
  fixedSeedTests(CI_SEEDS.slice(2));
});
