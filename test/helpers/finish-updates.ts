// The record updates the outcome store tests pass to finish-attempt.lua (OutcomeStore.finish), in one place.
import type { FinishArgs } from '../../src/outcomes/store.ts';

export type Update = NonNullable<FinishArgs['update']>;

/** A 200 that moved the learner: transfer id `x`, 12 ms, one attempt. */
export const transferred = (x: string): Update => ({
  b: 'transferred',
  c: 'transferred',
  s: 200,
  x,
  d: 12,
  n: 1,
  ok: 1,
});
