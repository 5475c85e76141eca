// The pacing buckets and the run window of the limiter's model (limiter-model.ts), in plain TypeScript:
// the same arithmetic as includes/policy.lua (lt_burst, lt_burst_spec, lt_pace), acquire.lua
// (runWindowWait) and peek.lua (bucket), operation for operation, so that every float the scripts compute
// is the same double here. Apart from it, and not derived from the tats: the bucket bound
// (bucketViolation), which holds the grants of a scope to what its bucket can let through.

/** includes/policy.lua LT_BURST_MAX_COUNT and LT_PACE_EPSILON. */
const BURST_MAX_COUNT = 1_000_000;
const PACE_EPSILON = 1e-3;

/**
 * C's "%.3f" of a double, as the scripts store a tat (string.format is libc's printf: the exact binary
 * value rounded, a tie to the even digit). Not toFixed(3): it rounds a tie up, and a tat near 1.8e12 is a
 * multiple of 2^-12, so x.0625 and its kin do occur (1 in 512 of the fractions).
 */
export function fmt3(x: number): string {
  if (!Number.isFinite(x)) throw new Error(`fmt3: ${x}`);
  // toFixed(100) is the exact decimal value for every double the limiter meets (>= 2^-48 or 0).
  const [int, frac = ''] = Math.abs(x).toFixed(100).split('.');
  const rest = frac.slice(3);
  let n = BigInt(`${int}${frac.slice(0, 3)}`);
  const over = rest > '5'.padEnd(rest.length, '0');
  const tie = rest === '5'.padEnd(rest.length, '0');
  if (over || (tie && n % 2n === 1n)) n += 1n;
  const digits = n.toString().padStart(4, '0');
  const sign = x < 0 || Object.is(x, -0) ? '-' : '';
  return `${sign}${digits.slice(0, -3)}.${digits.slice(-3)}`;
}

/** A value as the scripts store it and read it back (tonumber of "%.3f"). */
export const stored3 = (x: number): number => Number(fmt3(x));

/**
 * includes/policy.lua lt_burst: the bucket of a scope whose limit in force is `max`, or null for no
 * pacing (none set, as large as the limit, or malformed: see burstMalformed).
 */
export function burstSize(spec: string | undefined, max: number): number | null {
  if (spec === undefined || spec === '') return null;
  const b = burstOf(spec, max);
  return b === null || b >= max ? null : b;
}

function burstOf(spec: string, max: number): number | null {
  const p = /^(\d+)%$/.exec(spec);
  if (p) {
    const percent = Number(p[1]);
    return percent >= 1 && percent <= 100 ? Math.max(1, Math.floor((max * percent) / 100)) : null;
  }
  const n = /^(\d+)$/.exec(spec);
  const count = n ? Number(n[1]) : NaN;
  return count >= 1 && count <= BURST_MAX_COUNT ? count : null;
}

/**
 * A stored burst the scripts ignore and name: neither "N" (1..1e6) nor "P%" (1..100). The empty text is
 * one too ("a malformed value means no pacing, never a guess", and the fallback applies).
 */
export function burstMalformed(stored: string): boolean {
  return burstOf(stored, BURST_MAX_COUNT + 1) === null;
}

/** includes/policy.lua lt_burst_spec: the policy's burst, or the fallback when it has none or a malformed one. */
export function burstSpec(stored: string | undefined, fallback: string): string {
  return stored !== undefined && !burstMalformed(stored) ? stored : fallback;
}

/**
 * includes/policy.lua lt_pace: the ms until the bucket allows one permit at `now` (0: now), and its tat
 * after granting it now (null when refused).
 */
export function pace(
  tat: number | undefined,
  now: number,
  max: number,
  windowMs: number,
  burst: number,
): { waitMs: number; tat: number | null } {
  const interval = windowMs / max;
  const t = Math.max(tat ?? 0, now);
  const allowAt = t - (burst - 1) * interval;
  if (now + PACE_EPSILON >= allowAt) return { waitMs: 0, tat: t + interval };
  return { waitMs: Math.ceil(allowAt - now - PACE_EPSILON), tat: null };
}

/** The first whole ms at which a bucket allows one permit again (an edge where an off-by-one would show). */
export function allowedFrom(tat: number, max: number, windowMs: number, burst: number): number {
  return Math.ceil(tat - (burst - 1) * (windowMs / max) - PACE_EPSILON);
}

/** TransferBudget's PaceView of one scope, from peek.lua's bucket(). */
export interface PaceModelView {
  burst: number;
  available: number;
  nextInMs: number;
  intervalMs: number;
  tatInMs: number;
}

export function bucketView(
  tat: number | undefined,
  now: number,
  max: number,
  windowMs: number,
  burst: number,
): PaceModelView {
  const wait = pace(tat, now, max, windowMs, burst).waitMs;
  const interval = windowMs / max;
  const t = Math.max(tat ?? 0, now);
  const allows = Math.floor((now + PACE_EPSILON + (burst - 1) * interval - t) / interval) + 1;
  return {
    burst,
    available: Math.max(0, Math.min(burst, allows)),
    nextInMs: wait,
    intervalMs: windowMs / max,
    tatInMs: stored3(t - now),
  };
}

/** The `open` field as acquire.lua scans it: the horizon, then [s, e) pairs (a dangling s is ignored). */
export function parseOpen(open: string): { horizon: number | null; intervals: Array<[number, number]> } {
  const ns = (open.match(/\d+/g) ?? []).map(Number);
  const intervals: Array<[number, number]> = [];
  for (let i = 1; i + 1 < ns.length; i += 2) intervals.push([ns[i] as number, ns[i + 1] as number]);
  return { horizon: ns.length > 0 ? (ns[0] as number) : null, intervals };
}

/**
 * acquire.lua runWindowWait: 0 when open at `now`, else the ms until the next start (or until the
 * horizon when none is before it), -1 when the intervals are stale (no horizon, or past it).
 */
export function runWindowWait(open: string, now: number): number {
  const { horizon, intervals } = parseOpen(open);
  for (const [s, e] of intervals) {
    if (now < s) return s - now;
    if (now < e) return 0;
  }
  if (horizon === null || now >= horizon) return -1;
  return horizon - now;
}

/** A scope's pacing at one grant: its bucket and refill interval, or null when it did not pace. */
export interface PaceParams {
  burst: number;
  intervalMs: number;
}

/**
 * The grants of one scope since its (burst, interval) last changed (or it granted unpaced): the tat
 * changes only at a grant of the scope, so between two such grants any change of the policy that came
 * and went granted nothing under it, and GCRA holds these grants to its bound whatever tat they began
 * with.
 */
export interface Stretch {
  params: PaceParams;
  times: number[];
}

/**
 * Records a grant at `now` of a scope paced with `params` (null: not paced, which ends its stretch) and
 * checks the bucket bound: any span [t_i, t_j] of the stretch's grants holds at most
 * burst + (t_j - t_i) / interval of them. Returns the stretch after the grant and a description when the
 * bound is broken; `tight` when some span is within one permit of it (the bound was at stake).
 */
export function bucketViolation(
  stretch: Stretch | undefined,
  params: PaceParams | null,
  now: number,
  label: string,
): { stretch: Stretch | undefined; violation: string | null; tight: boolean } {
  if (params === null) return { stretch: undefined, violation: null, tight: false };
  const same =
    stretch !== undefined &&
    stretch.params.burst === params.burst &&
    stretch.params.intervalMs === params.intervalMs;
  const next: Stretch = { params, times: same ? [...stretch.times, now] : [now] };
  const n = next.times.length;
  let tight = false;
  for (const [i, t] of next.times.entries()) {
    const count = n - i;
    const bound = params.burst + (now - t) / params.intervalMs;
    if (count > bound + 1e-9) {
      return {
        stretch: next,
        violation:
          `${label}: ${count} grants in [${t}, ${now}] under a bucket of ${params.burst} refilled every ` +
          `${params.intervalMs} ms (at most ${bound}): ${next.times.slice(i).join(', ')}`,
        tight: true,
      };
    }
    if (count > params.burst && count > bound - 1) tight = true;
  }
  return { stretch: next, violation: null, tight };
}
