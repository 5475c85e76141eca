// The canary is judged by the error budget's own setting and table (docs/canary.md, docs/guard-rails.md):
// haltShareOf turns config's HALT_AT into a share (50 -> 0.5, 'off' -> Infinity), and BUDGET_FAILURES is
// exactly the outcome table's final non-success halt kinds, not a second list kept by hand.
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/core/config.ts';
import { DEFAULT_HALT_AT as HALT_AT_PERCENT } from '../../src/core/halt-rule.ts';
import {
  BUDGET_FAILURES,
  canaryVerdict,
  DEFAULT_HALT_AT,
  haltShareOf,
} from '../../src/ops/actions/canary.ts';
import { OUTCOME_CODES, OUTCOMES } from '../../src/outcomes/codes.ts';
import { FAILURE_BUCKETS } from '../../src/outcomes/record.ts';

describe('haltShareOf', () => {
  it("turns HALT_AT's percent into a share, and off into Infinity", () => {
    expect(haltShareOf(50)).toBe(0.5);
    expect(haltShareOf(1)).toBe(0.01);
    expect(haltShareOf(100)).toBe(1);
    expect(haltShareOf('off')).toBe(Number.POSITIVE_INFINITY);
  });

  it('reads config as the error budget does: the default is the canary default', () => {
    expect(haltShareOf(loadConfig({}).haltAt)).toBe(DEFAULT_HALT_AT);
    expect(haltShareOf(HALT_AT_PERCENT)).toBe(DEFAULT_HALT_AT);
    expect(haltShareOf(loadConfig({ HALT_AT: '80%' }).haltAt)).toBe(0.8);
    expect(haltShareOf(loadConfig({ HALT_AT: 'off' }).haltAt)).toBe(Number.POSITIVE_INFINITY);
  });

  it('judges a finished canary at that share: below it approved, at it not; off approves any', () => {
    const tenWithFailures = (n: number) => ({ transferred: 10 - n, forbidden: n, total: 10 });
    expect(canaryVerdict(tenWithFailures(4), haltShareOf(50)).withinBudget).toBe(true);
    expect(canaryVerdict(tenWithFailures(5), haltShareOf(50)).withinBudget).toBe(false);
    expect(canaryVerdict(tenWithFailures(1), haltShareOf(10)).withinBudget).toBe(false);
    expect(canaryVerdict(tenWithFailures(9), haltShareOf(100)).withinBudget).toBe(true);
    expect(canaryVerdict(tenWithFailures(10), haltShareOf(100)).withinBudget).toBe(false);
    expect(canaryVerdict(tenWithFailures(10), haltShareOf('off')).withinBudget).toBe(true);
    // Not finished (a learner still queued), or nothing judged: never approved by itself.
    expect(canaryVerdict({ transferred: 9, queued: 1, total: 10 }, haltShareOf('off')).withinBudget).toBe(
      false,
    );
    expect(canaryVerdict({ cancelled: 10, total: 10 }, haltShareOf('off')).withinBudget).toBe(false);
  });
});

describe('BUDGET_FAILURES', () => {
  it("is the outcome table's final kinds that are neither success nor outside the budget", () => {
    const fromTable = OUTCOME_CODES.filter((c) => {
      const halt = OUTCOMES[c].halt;
      return halt !== null && halt !== 'success';
    });
    expect([...BUDGET_FAILURES].sort()).toEqual([...fromTable].sort());
    expect([...BUDGET_FAILURES].sort()).toEqual(
      [
        'bad-response',
        'forbidden',
        'invalid-request',
        'not-found',
        'server-error',
        'unexpected-result',
      ].sort(),
    );
    // Each is a final failure bucket a canary's counters hold; no success is among them.
    for (const code of BUDGET_FAILURES) {
      expect(FAILURE_BUCKETS).toContain(code);
      expect(OUTCOMES[code as (typeof OUTCOME_CODES)[number]].success).toBe(false);
    }
  });
});
