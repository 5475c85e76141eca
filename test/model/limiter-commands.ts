// The commands fast-check draws for the limiter's model test (limiter.model.test.ts), and the setup of
// one run: what each command means is in the test's run(); here only their shapes and how often each
// comes (mostly acquires and clock steps, which fill windows and buckets and empty them again).
import fc from 'fast-check';
import type { Burst } from '../../src/core/burst.ts';

export const TOKENS = ['tA', 'tB', 'tC'];
/** Seconds of stepped time: windows and deadlines meet often, key TTLs (real time) never run out. */
export const WINDOWS = [2_000, 3_000, 5_000];
/** A run window's horizon far past any run's end (a run steps at most 60 * 7 s; the edges may jump to it). */
export const FAR_HORIZON_MS = 86_400_000;

export type OrgIx = 0 | 1;
export type Cmd =
  | { c: 'acquire'; org: OrgIx; pool: number[] }
  | { c: 'settle'; pick: number }
  | { c: 'abandon'; pick: number }
  | { c: 'release'; pick: number }
  | { c: 'learn'; pick: number }
  | { c: 'tick'; ms: number }
  | { c: 'edge'; pick: number }
  | { c: 'limits'; org: OrgIx; perOrg?: [number, number]; perToken?: [number, number]; token?: number }
  | { c: 'reserve'; org: OrgIx; count?: number; share?: number }
  | { c: 'reset'; org: OrgIx }
  | { c: 'pause'; org: OrgIx; token: number | null; on: boolean }
  | { c: 'block'; org: OrgIx; token: number | null; on: boolean }
  | { c: 'peek'; org: OrgIx; pool: number[] }
  /** `limits set --burst` */
  | { c: 'burst'; org: OrgIx; burst: Burst }
  /** The stored burst written by hand (HSET; null: HDEL): a malformed one must be ignored and named. */
  | { c: 'burstRaw'; org: OrgIx; value: string | null }
  /**
   * The run window's `open` field written by hand (HSET, stepped-clock ms): [s, e) as offsets from now,
   * the horizon `horizonIn` after the last end (or after now). null: HDEL, no run window.
   */
  | { c: 'open'; org: OrgIx; intervals: Array<[number, number]> | null; horizonIn: number };

export interface Setup {
  token: [number, number];
  org: [number, number];
  inflightTtlMs: number;
  /** TransferBudget's fallback burst (LIMIT_BURST), for a policy with none. */
  burst?: Burst;
}

const orgIx = fc.constantFrom<OrgIx>(0, 1);
const pool = fc.shuffledSubarray([0, 1, 2], { minLength: 1 });
const windowIx = fc.integer({ min: 0, max: WINDOWS.length - 1 });
const pick = fc.nat({ max: 1000 });
const tokenOrNull = fc.option(fc.integer({ min: 0, max: 2 }), { nil: null });
/** Mostly smaller than the limits (which are 1-8 mostly), so that a bucket paces. */
const burst: fc.Arbitrary<Burst> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ count: fc.integer({ min: 1, max: 5 }) }) },
  { weight: 2, arbitrary: fc.record({ percent: fc.constantFrom(1, 10, 25, 34, 50, 75, 100) }) },
);
/**
 * Stored bursts no writer makes: malformed ones (the empty text among them: named and replaced by the
 * fallback, as any other), and two valid ones ("007" is 7, "100%" no pacing).
 */
const rawBurst = fc.constantFrom(
  '',
  '0',
  '0%',
  '101%',
  'abc',
  '1.5',
  '1000001',
  ' 5',
  '5 %',
  'off',
  '007',
  '100%',
);

/** Up to four [s, e) after one another from 3 s ago, 1 ms to 6 s long (one ms: both edges at once). */
const openIntervals = fc
  .array(fc.tuple(fc.integer({ min: 1, max: 3_000 }), fc.integer({ min: 1, max: 6_000 })), { maxLength: 4 })
  .map((pairs) => {
    let at = -3_000;
    return pairs.map(([gap, length]): [number, number] => {
      const s = at + gap;
      at = s + length;
      return [s, at];
    });
  });

export const command: fc.Arbitrary<Cmd> = fc.oneof(
  { weight: 12, arbitrary: fc.record({ c: fc.constant('acquire' as const), org: orgIx, pool }) },
  { weight: 4, arbitrary: fc.record({ c: fc.constant('settle' as const), pick }) },
  { weight: 2, arbitrary: fc.record({ c: fc.constant('abandon' as const), pick }) },
  { weight: 2, arbitrary: fc.record({ c: fc.constant('release' as const), pick }) },
  { weight: 3, arbitrary: fc.record({ c: fc.constant('learn' as const), pick }) },
  {
    weight: 4,
    arbitrary: fc.record({
      c: fc.constant('tick' as const),
      ms: fc.oneof(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 7_000 })),
    }),
  },
  { weight: 4, arbitrary: fc.record({ c: fc.constant('edge' as const), pick }) },
  {
    weight: 1,
    arbitrary: fc.record(
      {
        c: fc.constant('limits' as const),
        org: orgIx,
        // Mostly small limits, which fill in a few commands; sometimes a large one, under which a learned
        // limit probes up by more than 1 a step (5% of the configured limit).
        perOrg: fc.tuple(
          fc.oneof({ weight: 4, arbitrary: fc.integer({ min: 1, max: 6 }) }, fc.constant(60)),
          windowIx,
        ),
        perToken: fc.tuple(
          fc.oneof({ weight: 4, arbitrary: fc.integer({ min: 1, max: 4 }) }, fc.constant(40)),
          windowIx,
        ),
        token: fc.integer({ min: 0, max: 2 }),
      },
      { requiredKeys: ['c', 'org'] },
    ),
  },
  {
    weight: 1,
    arbitrary: fc.oneof(
      fc.record({ c: fc.constant('reserve' as const), org: orgIx, count: fc.integer({ min: 0, max: 3 }) }),
      fc.record({ c: fc.constant('reserve' as const), org: orgIx, share: fc.integer({ min: 0, max: 60 }) }),
    ),
  },
  { weight: 1, arbitrary: fc.record({ c: fc.constant('reset' as const), org: orgIx }) },
  {
    weight: 1,
    arbitrary: fc.record({
      c: fc.constant('pause' as const),
      org: orgIx,
      token: tokenOrNull,
      on: fc.boolean(),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      c: fc.constant('block' as const),
      org: orgIx,
      token: tokenOrNull,
      on: fc.boolean(),
    }),
  },
  { weight: 1, arbitrary: fc.record({ c: fc.constant('peek' as const), org: orgIx, pool }) },
  { weight: 2, arbitrary: fc.record({ c: fc.constant('burst' as const), org: orgIx, burst }) },
  {
    weight: 1,
    arbitrary: fc.record({
      c: fc.constant('burstRaw' as const),
      org: orgIx,
      value: fc.option(rawBurst, { nil: null, freq: 3 }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      c: fc.constant('open' as const),
      org: orgIx,
      intervals: fc.option(openIntervals, { nil: null, freq: 2 }),
      // Mostly far: the intervals stay current; sometimes near, to go stale within the run.
      horizonIn: fc.oneof(
        { weight: 4, arbitrary: fc.constant(FAR_HORIZON_MS) },
        fc.integer({ min: 1, max: 9_000 }),
      ),
    }),
  },
);

export const setup: fc.Arbitrary<Setup> = fc.record(
  {
    token: fc.tuple(fc.integer({ min: 1, max: 5 }), windowIx),
    org: fc.tuple(fc.integer({ min: 2, max: 8 }), windowIx),
    inflightTtlMs: fc.constantFrom(1_000, 2_500, 6_000),
    burst,
  },
  { requiredKeys: ['token', 'org', 'inflightTtlMs'] },
);

/**
 * Lists run first in every run of the file: paths the random search seldom takes. The first: a 429 on
 * the first permit of a window teaches a limit of 1; then a 429 on the fourth, before which the service
 * had accepted 2 (the first is left out: refused), above the limit in force: learning it would raise it.
 * The second: a token's bucket of 2 (limit 4 per 2 s: one back every 500 ms) empties and refuses 'pace';
 * a run window opens for one ms (granted at its first and last ms at once), refuses at its end with the
 * wait to the next start, opens again with the bucket refilled while it was closed, grants its last ms
 * and refuses at its end until the horizon; then a run window that goes stale is refreshed away. The
 * third and fourth: a bucket of 1 whose wait equals the window's (the window frees one ms after its
 * permit's bucket, so the second permit comes 1 ms late): the scope is the window's, a token's, then the
 * organization's.
 */
export const EXAMPLES: Array<[Setup, Cmd[]]> = [
  [
    { token: [4, 0], org: [8, 0], inflightTtlMs: 6_000 },
    [
      ...[0, 1, 2, 3].map((): Cmd => ({ c: 'acquire', org: 0, pool: [0] })),
      ...[0, 1, 2, 3].map((pick): Cmd => ({ c: 'settle', pick })),
      { c: 'learn', pick: 0 },
      { c: 'learn', pick: 3 },
      { c: 'acquire', org: 0, pool: [0] },
    ],
  ],
  [
    { token: [4, 0], org: [8, 0], inflightTtlMs: 1_000, burst: { count: 2 } },
    [
      ...[0, 1, 2].map((): Cmd => ({ c: 'acquire', org: 0, pool: [0] })),
      {
        c: 'open',
        org: 0,
        intervals: [
          [1_000, 1_001],
          [2_000, 4_000],
        ],
        horizonIn: FAR_HORIZON_MS,
      },
      { c: 'acquire', org: 0, pool: [0] },
      { c: 'tick', ms: 1_000 },
      { c: 'acquire', org: 0, pool: [0] },
      { c: 'tick', ms: 1 },
      { c: 'acquire', org: 0, pool: [0] },
      { c: 'tick', ms: 999 },
      ...[0, 1, 2].map((): Cmd => ({ c: 'acquire', org: 0, pool: [0] })),
      { c: 'peek', org: 0, pool: [0, 1] },
      { c: 'tick', ms: 1_999 },
      { c: 'acquire', org: 0, pool: [0] },
      { c: 'tick', ms: 1 },
      { c: 'acquire', org: 0, pool: [0] },
      { c: 'open', org: 0, intervals: [], horizonIn: 5 },
      { c: 'tick', ms: 5 },
      { c: 'acquire', org: 0, pool: [0] },
    ],
  ],
  [
    { token: [2, 0], org: [8, 0], inflightTtlMs: 6_000, burst: { count: 1 } },
    [
      { c: 'acquire', org: 0, pool: [0] },
      { c: 'settle', pick: 0 },
      { c: 'tick', ms: 1_001 },
      { c: 'acquire', org: 0, pool: [0] },
      { c: 'acquire', org: 0, pool: [0] },
    ],
  ],
  [
    { token: [5, 0], org: [2, 0], inflightTtlMs: 6_000, burst: { count: 1 } },
    [
      { c: 'acquire', org: 0, pool: [0] },
      { c: 'settle', pick: 0 },
      { c: 'tick', ms: 1_001 },
      { c: 'acquire', org: 0, pool: [1] },
      { c: 'acquire', org: 0, pool: [2] },
    ],
  ],
];
