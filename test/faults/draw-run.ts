// The run a seed stands for, drawn from it and from nothing else (stream(seed, ...) of the simulator's own
// PRNG): the learners to move and those the service refuses, the tokens, the limits both sides enforce and
// their window, the worker processes. The same seed always draws the same run, so a failing seed is
// replayed by its number alone.
import type { Rate } from '../../src/core/duration.ts';
import { stream, type Random } from '../../src/simulator/random.ts';
import type { RepeatMode } from '../../src/simulator/index.ts';

/** Learners of the simulator's world; learner i belongs to acme, beta, gamma in turn (acme: i % 3 === 1). */
export const SIM_LEARNERS = 300;
/** Ids the simulator does not know: a transfer of one answers 404. */
const MISSING_FROM = 900_001;

export interface RunPlan {
  seed: number;
  /** Every learner enqueued for acme, in enqueue order. */
  ids: number[];
  /** Outside acme, the service moves them (unless refused below). */
  movable: number[];
  /** In acme already: 400 "already associated" or a 200 repeat. */
  alreadyIn: number[];
  /** Unknown to the service: 404. */
  missing: number[];
  /** The service answers 403 for them (simulator forbiddenLearnerIds). */
  forbidden: number[];
  /** The service answers 500 for them, always (simulator failingLearnerIds). */
  failing: number[];
  /** Token secrets of acme (never printed: a seed names them by index). */
  tokens: string[];
  perToken: Rate;
  perOrg: Rate;
  /** LIMIT_BURST of the workers: pacing under faults too ('off': the windows alone). */
  burst: string;
  window: 'rolling' | 'fixed';
  repeatMode: RepeatMode;
  /** Worker processes, each with its own spool directory. */
  slots: number;
  concurrency: number;
  requestTimeoutMs: number;
  /** The service's usual answer time (latencyAfterMs), faults aside. */
  latencyMs: [number, number];
}

function shuffled<T>(random: Random, items: readonly T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = random.int(0, i);
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

/** Token secrets long enough (>= 8 characters) for the log scrubber, unmistakable in a scan. */
function drawTokens(seed: number, count: number): string[] {
  const random = stream(seed, 'faults:tokens');
  return Array.from({ length: count }, (_, i) => `faultTOKEN-acme-${i + 1}-${random.hex(16)}`);
}

/**
 * How many learners to move: the first window's burst, then about 7-10 s at the budget's pace, so that the
 * schedule's faults (drawn within the first ~9 s) fall while learners are still moving.
 */
function learnerCount(random: Random, tokens: number, perToken: Rate, perOrg: Rate): number {
  const perSecond = Math.min(
    (tokens * perToken.max * 1000) / perToken.windowMs,
    (perOrg.max * 1000) / perOrg.windowMs,
  );
  const burst = Math.min(tokens * perToken.max, perOrg.max);
  return Math.max(20, Math.min(80, Math.round(burst + perSecond * (7 + random.next() * 3))));
}

export function drawRun(seed: number): RunPlan {
  const random = stream(seed, 'faults:run');
  const tokenCount = random.int(1, 3);
  const perToken: Rate = { max: random.int(5, 10), windowMs: 2000 };
  const perOrg: Rate = { max: random.int(14, 26), windowMs: 4000 };
  const count = learnerCount(random, tokenCount, perToken, perOrg);
  const pool = shuffled(
    random,
    Array.from({ length: SIM_LEARNERS - 1 }, (_, i) => i + 2),
  );
  const outside = pool.filter((id) => id % 3 !== 1);
  const inAcme = pool.filter((id) => id % 3 === 1);
  const movable = outside.slice(0, count);
  // At most one that always fails: its ATTEMPTS calls and their backoff cost the run seconds.
  const refused = outside.slice(count, count + random.int(0, 2) + (random.chance(0.4) ? 1 : 0));
  const failing = refused.length > 0 && random.chance(0.5) ? refused.slice(-1) : [];
  const forbidden = refused.filter((id) => !failing.includes(id));
  const alreadyIn = inAcme.slice(0, random.int(0, 3));
  const missing = Array.from({ length: random.int(0, 2) }, (_, i) => MISSING_FROM + i);
  const requestTimeoutMs = random.pick([1500, 2000, 2500, 3000]);
  // Slow enough that calls are in flight most of the time, well within the request timeout.
  const slow = random.int(150, 700);
  return {
    seed,
    ids: shuffled(random, [...movable, ...refused, ...alreadyIn, ...missing]),
    movable,
    alreadyIn,
    missing,
    forbidden,
    failing,
    tokens: drawTokens(seed, tokenCount),
    perToken,
    perOrg,
    // From a stream of its own, so every other draw of a seed is what it was before pacing existed.
    burst: stream(seed, 'faults:burst').pick(['off', 'off', '50%', '3', '1'] as const),
    window: random.pick(['rolling', 'fixed'] as const),
    repeatMode: random.pick(['success', 'error', 'mixed'] as const),
    slots: random.int(1, 3),
    concurrency: random.int(2, 6),
    requestTimeoutMs,
    latencyMs: [Math.floor(slow / 4), slow],
  };
}
