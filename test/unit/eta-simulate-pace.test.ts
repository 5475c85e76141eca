// The ETA's simulation (limiter/simulate/) with pacing buckets and a run window, against a brute-force
// reference written here: event by event, one permit at a time, no batching, no period leaping, the
// rules of acquire.lua read plainly (a grant needs room in the organization's window and bucket and in
// one token's window and bucket, the token with the most window room first; outside the run window
// nothing). Seeded random cases must agree to the ms; hand-worked cases check the reference itself.
import { describe, expect, it } from 'vitest';
import { simulate, type PacedScope, type SimInput } from '../../src/limiter/simulate/index.ts';

/** acquire.lua's LT_PACE_EPSILON. */
const EPS = 1e-3;

class Ref {
  frees: Array<[number, number]>;
  tat: number;
  readonly interval: number;
  readonly tau: number;
  constructor(readonly s: PacedScope) {
    this.frees = s.frees.map(([a, n]) => [a, n]);
    this.interval = s.pace?.intervalMs ?? 0;
    this.tau = s.pace ? (s.pace.burst - 1) * s.pace.intervalMs : 0;
    this.tat = s.pace?.tatMs ?? -Infinity;
  }
  room(t: number): number {
    if (t < this.s.blockedMs) return 0;
    let used = 0;
    for (const [a, n] of this.frees) if (a > t) used += n;
    return this.s.limit - used;
  }
  bucketOk(t: number): boolean {
    return !this.s.pace || t + EPS >= Math.max(this.tat, t) - this.tau;
  }
  grant(t: number): void {
    this.frees.push([t + this.s.windowMs + 1, 1]);
    if (this.s.pace) this.tat = Math.max(this.tat, t) + this.interval;
  }
  /** The next whole ms after t at which something of this scope changes. */
  next(t: number): number {
    let c = Infinity;
    for (const [a] of this.frees) if (a > t && a < c) c = a;
    if (this.s.blockedMs > t && Number.isFinite(this.s.blockedMs)) c = Math.min(c, this.s.blockedMs);
    if (this.s.pace && !this.bucketOk(t))
      c = Math.min(c, Math.max(t + 1, Math.ceil(this.tat - this.tau - EPS)));
    return c;
  }
}

/** When the last of `remaining` permits is granted, one permit at a time. */
function reference(input: SimInput): number {
  let left = input.remaining;
  if (left <= 0) return 0;
  const org = new Ref(input.org);
  const tokens = input.tokens.map((s) => new Ref(s));
  let t = 0;
  for (let guard = 0; guard < 1e6; guard++) {
    const iv = input.open ? input.open(t) : ([-Infinity, Infinity] as const);
    if (!iv) return Infinity;
    if (iv[0] <= t && t < iv[1]) {
      for (;;) {
        if (!(org.room(t) > 0 && org.bucketOk(t))) break;
        let best = -1;
        let bestRoom = 0;
        tokens.forEach((k, i) => {
          const r = k.room(t);
          if (r > bestRoom && k.bucketOk(t)) [best, bestRoom] = [i, r];
        });
        if (best < 0) break;
        org.grant(t);
        tokens[best]?.grant(t);
        if (--left === 0) return t;
      }
    }
    let next = Math.min(org.next(t), ...tokens.map((k) => k.next(t)));
    if (input.open && iv[0] > t) next = Math.min(next, iv[0]);
    if (next === Infinity) return Infinity;
    t = next;
  }
  throw new Error('reference: no finish within its bound');
}

function mulberry(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A random small case: limits 1..20 (the organization sometimes up to 2000), windows 10..5000 ms. */
function randomCase(seed: number): SimInput {
  const rnd = mulberry(seed);
  const int = (a: number, b: number) => a + Math.floor(rnd() * (b - a + 1));
  const scope = (big: boolean): PacedScope => {
    const limit = big && rnd() < 0.3 ? int(50, 2000) : int(1, 20);
    const windowMs = int(10, 5000);
    const frees: Array<[number, number]> = [];
    const nf = rnd() < 0.5 ? 0 : int(1, 4);
    for (let i = 0; i < nf; i++)
      frees.push([int(1, windowMs + 1), int(1, Math.max(1, Math.ceil(limit / 2)))]);
    const blockedMs = rnd() < 0.8 ? 0 : rnd() < 0.5 ? int(1, 2 * windowMs) : Infinity;
    const interval = windowMs / limit;
    const burst = int(1, limit);
    const pace =
      rnd() < 0.7
        ? {
            burst,
            intervalMs: interval,
            tatMs: rnd() < 0.5 ? (rnd() < 0.5 ? 0 : -int(0, windowMs)) : rnd() * (burst * interval),
          }
        : undefined;
    return { limit, windowMs, frees, blockedMs, pace };
  };
  const org = scope(true);
  if (!Number.isFinite(org.blockedMs)) org.blockedMs = 0;
  const tokens = Array.from({ length: int(1, 3) }, () => scope(false));
  if (tokens.every((t) => t.blockedMs === Infinity) && tokens[0]) tokens[0].blockedMs = 0;
  const input: SimInput = { remaining: int(1, 300), org, tokens };
  if (rnd() < 0.4) {
    // A periodic run window: open `len` ms of every `period`, from `off`.
    const period = int(20, 8000);
    const a = int(0, period - 1);
    const len = int(1, period - a);
    const off = int(0, 3000);
    input.open = (t) => {
      const k = Math.max(0, Math.floor((t - off - a) / period));
      let s = off + a + k * period;
      if (t >= s + len) s += period;
      return [s, s + len];
    };
    if (rnd() < 0.8) input.openPeriodMs = period;
  }
  return input;
}

const S = 1000;
const H = 3_600_000;
const fresh = (limit: number, windowMs: number, burst?: number): PacedScope => ({
  limit,
  windowMs,
  frees: [],
  blockedMs: 0,
  ...(burst ? { pace: { burst, intervalMs: windowMs / limit, tatMs: 0 } } : {}),
});

describe('the simulation with pacing and a run window', () => {
  it('agrees with the brute-force reference to the ms on 400 seeded random cases', () => {
    const wrong: string[] = [];
    let leapt = 0;
    for (let seed = 1; seed <= 400; seed++) {
      const input = randomCase(seed);
      const want = reference(input);
      const got = simulate(input);
      if (got.finishMs !== want) wrong.push(`seed ${seed}: simulate ${got.finishMs}, reference ${want}`);
      // Every ms until the finish is spent waiting on something, or granting.
      const waited = got.waited.org + got.waited.token + got.waited.pace + got.waited['run-window'];
      if (Number.isFinite(got.finishMs) && waited !== got.finishMs)
        wrong.push(`seed ${seed}: waits sum to ${waited}, finish ${got.finishMs}`);
      if (got.steps < input.remaining) leapt++;
    }
    expect(wrong).toEqual([]);
    // And it did not get there one permit at a time: most cases were batched or leapt over.
    expect(leapt).toBeGreaterThan(200);
  });

  it('100/1h with a burst of 10: 10 at once, then one every 36 s (25 learners: 540 s)', () => {
    const input: SimInput = { remaining: 25, org: fresh(1_000_000, 86_400_000), tokens: [fresh(100, H, 10)] };
    expect(reference(input)).toBe(15 * 36 * S);
    const r = simulate(input);
    expect(r.finishMs).toBe(15 * 36 * S);
    expect(r.boundBy).toBe('pace');
  });

  it('a closed run window is waited for and counted as such', () => {
    // Open [10 s, 20 s) of every minute; 5 learners fit the first opening.
    const open = (t: number): [number, number] => {
      const k = Math.floor(Math.max(0, t - 10 * S) / (60 * S));
      const s = k * 60 * S + 10 * S;
      return t >= s + 10 * S ? [s + 60 * S, s + 70 * S] : [s, s + 10 * S];
    };
    const input: SimInput = { remaining: 5, org: fresh(100, 60 * S), tokens: [fresh(100, 60 * S)], open };
    const r = simulate(input);
    expect(r.finishMs).toBe(10 * S);
    expect(r.boundBy).toBe('run-window');
    expect(r.waited['run-window']).toBe(10 * S);
    // Paced at one per 2 s with a burst of 2: 2 at 10 s, then 12, 14, 16, 18 s: the fifth at 16 s; the
    // seventh no longer fits the opening (20 s) and goes at the next, 70 s.
    const paced: SimInput = { remaining: 7, org: fresh(100, 60 * S), tokens: [fresh(30, 60 * S, 2)], open };
    expect(reference(paced)).toBe(70 * S);
    expect(simulate(paced).finishMs).toBe(70 * S);
  });
});
