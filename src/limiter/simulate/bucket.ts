// A pacing bucket in the simulation, in GCRA form, with acquire.lua's comparison.
import type { SimPace } from './input.ts';

/**
 * acquire.lua's tolerance on a bucket's floats (LT_PACE_EPSILON): allowed iff now + EPS >= tat
 * - tau.
 */
export const PACE_EPSILON = 1e-3;

/** A pacing bucket in GCRA form, with acquire.lua's comparison (lt_pace). */
export class Bucket {
  tat: number;
  readonly interval: number;
  readonly tau: number;

  constructor(pace: SimPace) {
    this.tat = pace.tatMs;
    this.interval = pace.intervalMs;
    this.tau = (pace.burst - 1) * pace.intervalMs;
  }

  /** Whether the j-th permit in a row (1-based) is allowed at t. */
  private allows(t: number, j: number): boolean {
    return t + PACE_EPSILON >= Math.max(this.tat, t) + (j - 1) * this.interval - this.tau;
  }

  /** Permits it allows at t, one after another (at most its burst). */
  allowance(t: number): number {
    if (!this.allows(t, 1)) return 0;
    const base = Math.max(this.tat, t);
    let k = Math.floor((t + PACE_EPSILON - base + this.tau) / this.interval) + 1;
    while (k > 1 && !this.allows(t, k)) k--;
    while (this.allows(t, k + 1)) k++;
    return k;
  }

  /** The first whole ms from t at which it allows one. */
  allowAt(t: number): number {
    if (this.allows(t, 1)) return t;
    let c = Math.ceil(this.tat - this.tau - PACE_EPSILON);
    while (this.allows(c - 1, 1)) c--;
    while (!this.allows(c, 1)) c++;
    return Math.max(c, t);
  }

  take(t: number, n: number): void {
    this.tat = Math.max(this.tat, t) + n * this.interval;
  }

  /** Its state as seen from t: how far its tat is ahead (0: full, whatever the tat). */
  rel(t: number): number {
    return Math.max(0, this.tat - t);
  }
}
