// The suite's fixed seeds and the test each gets, shared by seeds.test.ts and seeds-more.test.ts: two
// files of two seeds each, so that the load-sensitive phase runs them side by side (a seed is 20-30 s
// alone, the four in one file ran 85-108 s at the end of that phase).
import { expect, it } from 'vitest';
import { nothingAtStake } from './at-stake.ts';
import { describeReport } from './describe.ts';
import { runSeed } from './run-seed.ts';

// Chosen for what their schedules hold between them (seeds.test.ts checks that they cover MUST_COVER)
// and for their time.
export const CI_SEEDS = [18, 334, 335, 344];

/** One test per seed: every invariant holds, and every fault had something at stake. */
export function fixedSeedTests(seeds: readonly number[]): void {
  for (const seed of seeds) {
    it(`seed ${seed}`, async () => {
      // The fixed seeds were chosen for what their faults meet with the windows alone: paced, fewer calls
      // are in flight at a given moment, and a kill can meet none. Paced runs under faults are
      // `npm run faults`'s (each seed draws its burst: docs/testing.md).
      const report = await runSeed(seed, { timeoutMs: 70_000, burst: 'off' });
      const account = describeReport(report).join('\n');
      expect(report.violations, account).toEqual([]);
      expect(nothingAtStake(report), account).toEqual([]);
    }, 90_000);
  }
}
