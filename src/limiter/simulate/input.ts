// The simulation's input (the limiter's state now) and answer (when the last remaining permit
// is granted).
import type { FreeStep } from '../budget-schedule.ts';
import type { ETA_BOUNDS, EtaBound } from '../kinds.ts';

/** What a wait is booked to: one of ETA_BOUNDS. */
export type SimBound = (typeof ETA_BOUNDS)[number];

/** [ms from now when these permits leave the window, how many], as the limiter reads them. */
export type Frees = readonly FreeStep[];

export interface SimScope {
  limit: number;
  windowMs: number;
  /** The permits counted now (in flight ones included), by when they leave the window. */
  frees: Frees;
  /** Usable again in this many ms (a 429's block); 0: now; Infinity: never (401, paused). */
  blockedMs: number;
}

/** A scope's pacing bucket in GCRA form, as acquire.lua keeps it ("Pacing"). */
export interface SimPace {
  /** Permits at once from a full bucket (1..limit): tau = (burst - 1) * intervalMs. */
  burst: number;
  /** T = window / limit, a float (not rounded): one permit back every T ms. */
  intervalMs: number;
  /** The theoretical arrival time, ms from now; <= 0: the bucket is full. */
  tatMs: number;
}

/** A scope that may pace: without `pace`, its window alone (acquire without a burst). */
export interface PacedScope extends SimScope {
  pace?: SimPace | undefined;
}

/** A window every grant counts in beside the organization's (a rule's, rules.ts), its own bound. */
export interface SharedScope extends PacedScope {
  /** What its window's waits are booked to (its bucket's: 'pace'). */
  bound: SimBound;
}

export interface SimInput {
  /** Permits still to be granted (learners to transfer). */
  remaining: number;
  org: PacedScope;
  /** Other windows every grant counts in, as the organization's (waits booked to their bounds). */
  shared?: readonly SharedScope[] | undefined;
  tokens: readonly PacedScope[];
  /**
   * The run window: the open interval [start, end) (ms from now) holding t, else the next;
   * null: never again.
   */
  open?: ((t: number) => readonly [number, number] | null) | undefined;
  /**
   * open(t + P) is open(t) shifted by P for every t >= openPeriodFromMs: lets a leap cross from
   * one open interval to the next.
   */
  openPeriodMs?: number | undefined;
  /** From when open() repeats with openPeriodMs (after the last blackout, say); default 0. */
  openPeriodFromMs?: number | undefined;
}

export interface SimResult {
  /** Ms from now until the last permit is granted; Infinity: never at these limits. */
  finishMs: number;
  /**
   * Time spent waiting, by bound: for the organization's window (its block included), the
   * tokens' (blocks included), a bucket (when it allows later than the window), the run window,
   * a shared window's. They add up to finishMs, but past MAX_STEPS.
   */
  waited: Record<SimBound, number>;
  /**
   * The longest of those waits, ETA_BOUNDS's order on a tie ('none': it fits the budget left
   * now).
   */
  boundBy: EtaBound;
  /** Batches simulated (not leapt over), for the bench. */
  steps: number;
}
