// The ETA's forward simulation of the limiter (src/limiter/acquire.lua): a sliding-window log per token
// and per organization, a pacing bucket (GCRA) per scope when it paces, and the run window. A permit is
// granted as soon as the organization's window and bucket and some token's window and bucket all allow it,
// inside the run window, and leaves each window at its grant time + window + 1 ms (a log entry scored s
// counts while now <= s + window). The start is the budget now: the permits counted in each window and
// when they leave (peek-frees.lua), the buckets' tats, blocks, pauses, the limits in force. Grants are
// taken in batches (every permit that fits at one instant at once, spread over the tokens as acquire
// spreads them one by one). Once the schedule repeats itself it is leapt over, whole periods at a time:
// 1,000,000 learners cost what 20,000 do, and a paced stretch of one grant every T costs a few batches,
// not one per grant (Sim and Sim.leapFrom say when a leap is exact; test/unit/eta-simulate-pace.test.ts
// checks it against acquire's rules permit by permit). A schedule that never repeats is simulated for
// MAX_STEPS batches, then goes on at its average pace per open ms. Pure: no Redis, no clock.

import type { FreeStep } from '../../limiter/budget-schedule.ts';

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

export interface SimInput {
  /** Permits still to be granted (learners to transfer). */
  remaining: number;
  org: PacedScope;
  tokens: readonly PacedScope[];
  /**
   * The run window: the open interval [start, end) (ms from now) that holds t, or else the next one that
   * starts after t; null: it never opens again. Absent: always open.
   */
  open?: ((t: number) => readonly [number, number] | null) | undefined;
  /**
   * open(t + P) is open(t) shifted by P for every t >= openPeriodFromMs (a weekly calendar without
   * blackouts: a week). Lets a leap cross from one open interval to another; without it only the stretches
   * inside one open interval are leapt over, and the intervals are simulated one after the other.
   */
  openPeriodMs?: number | undefined;
  /** From when open() repeats with openPeriodMs (after the last blackout, say); default 0. */
  openPeriodFromMs?: number | undefined;
}

/** What held the work back the longest: a window, a bucket, the run window ('none': it fits now). */
export type SimBound = 'org' | 'token' | 'pace' | 'run-window' | 'none';

export interface SimResult {
  /** Ms from now until the last permit is granted; Infinity: never at these limits. */
  finishMs: number;
  /**
   * Time spent waiting: for the organization's window (its block included), for the tokens' (blocks
   * included), for a bucket (the organization's or a token's: when it allows later than the window, a tie
   * goes to the window), and for the run window to open once all else allowed. They add up to finishMs
   * (but past MAX_STEPS, where the rest is extrapolated).
   */
  waited: { org: number; token: number; pace: number; closed: number };
  /** The longest of those waits ('none': it fits the budget left now). */
  boundBy: SimBound;
  /** Batches simulated (not leapt over), for the bench. */
  steps: number;
}

/** A bound on the batches simulated; past it the rest goes at the average pace so far (in open time). */
const MAX_STEPS = 20_000;
/** acquire.lua's tolerance on a bucket's float arithmetic (LT_PACE_EPSILON): allowed iff now + EPS >= tat - tau. */
const PACE_EPSILON = 1e-3;
/** Two bucket states closer than this (ms) are the same state (their tats went through different sums). */
const SAME_TAT = 1e-7;
/** Batches looked back at for a short period (a paced stretch repeats within a few grants). */
const LOOKBACK = 8;
/** At most this many batches between two tries of a period that failed before. */
const MAX_BACKOFF = 32;
/** A log's whole state repeats (Log.extent). */
const FULL = Infinity;

/**
 * A window's log: when its permits leave, in order, as runs (`reps` times `count` permits, leaving `step`
 * ms apart from `start` on: a paced stretch is one run, however long), with the ones already gone kept for
 * a while (Log.extent compares the frees to come with those of a period before).
 */
class Log {
  private readonly start: number[] = [];
  private readonly step: number[] = [];
  private readonly reps: number[] = [];
  private readonly count: number[] = [];
  /** Runs: the first still counted, and how many of its permits are gone. */
  private len = 0;
  private head = 0;
  private gone = 0;
  used = 0;
  /** Runs that had all left by this time were dropped: no period reaching back further is checked. */
  private forgotten = -Infinity;
  /** (from, to] pairs of free times never recorded: leapt over by a shift. */
  private readonly holes: number[] = [];
  /** When the last permit counted at the start leaves: it is no grant's, so no period repeats it. */
  readonly lastStart: number;
  /** Pairs (p, f): extent found a mismatch at time f with the frees p earlier (forgotten on a shift). */
  private readonly mismatches: number[] = [];
  /** A position (run, index in it), set by seek. */
  private run = 0;
  private rep = 0;

  constructor(
    readonly limit: number,
    readonly windowMs: number,
    frees: Frees,
    private readonly keepMs: number,
  ) {
    let last = -Infinity;
    for (const [at, n] of frees) {
      if (!(n > 0)) continue;
      this.push(at, n);
      last = Math.max(last, at);
    }
    this.lastStart = last;
  }

  private at(run: number, rep: number): number {
    return (this.start[run] ?? 0) + rep * (this.step[run] ?? 0);
  }
  private last(run: number): number {
    return this.at(run, (this.reps[run] ?? 1) - 1);
  }

  /** Adds n permits leaving at `at`. */
  push(at: number, n: number): void {
    this.pushRun(at, 0, 1, n);
  }

  /** Adds `reps` times n permits leaving `step` ms apart from `at` on, extending the last run when it goes on alike. */
  pushRun(at: number, step: number, reps: number, n: number): void {
    const r = this.len - 1;
    const last = r >= 0 ? this.last(r) : -Infinity;
    if (at <= last && r >= this.head) {
      // Only the start's frees (rounded up) can come after a grant's: these go in one by one.
      for (let k = 0; k < reps; k++) this.insert(at + k * step, n);
      return;
    }
    this.used += reps * n;
    if (r >= this.head && this.count[r] === n && at > last) {
      const gap = at - last;
      const runs = (this.reps[r] ?? 1) > 1;
      if ((runs ? this.step[r] === gap : true) && (reps === 1 || step === gap)) {
        this.step[r] = gap;
        this.reps[r] = (this.reps[r] ?? 1) + reps;
        return;
      }
    }
    this.start[this.len] = at;
    this.step[this.len] = step;
    this.reps[this.len] = reps;
    this.count[this.len] = n;
    this.len++;
  }

  /** Puts n permits leaving at `at` among the runs counted, splitting the run it falls in. */
  private insert(at: number, n: number): void {
    this.used += n;
    if (this.gone > 0) {
      this.split(this.head, this.gone);
      this.head++;
      this.gone = 0;
    }
    let r = this.head;
    while (r < this.len && this.last(r) < at) r++;
    if (r < this.len && (this.reps[r] ?? 1) > 1 && (this.start[r] ?? 0) < at) {
      this.split(r, Math.ceil((at - (this.start[r] ?? 0)) / (this.step[r] ?? 1)));
      r++;
    }
    if (r < this.len && this.start[r] === at && (this.reps[r] ?? 1) > 1) this.split(r, 1);
    if (r < this.len && this.start[r] === at) {
      this.count[r] = (this.count[r] ?? 0) + n;
      return;
    }
    this.start.splice(r, 0, at);
    this.step.splice(r, 0, 0);
    this.reps.splice(r, 0, 1);
    this.count.splice(r, 0, n);
    this.len++;
  }

  /** Cuts run r after its first k permits (k < reps) into two runs. */
  private split(r: number, k: number): void {
    this.start.splice(r + 1, 0, this.at(r, k));
    this.step.splice(r + 1, 0, this.step[r] ?? 0);
    this.reps.splice(r + 1, 0, (this.reps[r] ?? 1) - k);
    this.count.splice(r + 1, 0, this.count[r] ?? 0);
    this.reps[r] = k;
    this.len++;
  }

  /** Lets go of every permit that has left the window by `t`; drops what no period check can need. */
  release(t: number): void {
    while (this.head < this.len) {
      const r = this.head;
      const start = this.start[r] ?? 0;
      if (start > t) break;
      const reps = this.reps[r] ?? 1;
      const left = reps === 1 ? 1 : Math.min(reps, Math.floor((t - start) / (this.step[r] ?? 1)) + 1);
      if (left > this.gone) {
        this.used -= (left - this.gone) * (this.count[r] ?? 0);
        this.gone = left;
      }
      if (this.gone < reps) break;
      this.head++;
      this.gone = 0;
    }
    if (this.head < 256) return;
    // Runs end in order: the first still needed is found by halving.
    let drop = 0;
    for (let hi = this.head; drop < hi;) {
      const mid = (drop + hi) >> 1;
      if (this.last(mid) <= t - this.keepMs) drop = mid + 1;
      else hi = mid;
    }
    if (drop < 128) return;
    this.forgotten = this.last(drop - 1);
    for (const list of [this.start, this.step, this.reps, this.count]) list.splice(0, drop);
    this.len -= drop;
    this.head -= drop;
  }

  /** Permits it can take now (its block aside). */
  room(): number {
    return Math.max(0, Math.floor(this.limit - this.used));
  }

  /** When it next has room, from `t` (released to t; its block aside); Infinity: never. */
  roomAt(t: number): number {
    if (this.limit < 1) return Infinity;
    let need = this.used - Math.floor(this.limit) + 1;
    if (need <= 0) return t;
    for (let r = this.head; r < this.len; r++) {
      const from = r === this.head ? this.gone : 0;
      const n = this.count[r] ?? 1;
      const here = ((this.reps[r] ?? 1) - from) * n;
      if (here >= need) return this.at(r, from + Math.ceil(need / n) - 1);
      need -= here;
    }
    return Infinity;
  }

  /**
   * The log `by` ms later, when its whole state repeats (extent FULL) over a leap from `from`: the permits
   * counted move on; those that left before stay, and the leap is a hole no later period check may read.
   */
  shift(by: number, from: number): void {
    if (this.gone > 0) {
      this.split(this.head, this.gone);
      this.head++;
      this.gone = 0;
    }
    for (let r = this.head; r < this.len; r++) this.start[r] = (this.start[r] ?? 0) + by;
    this.holes.push(from, from + by);
    this.mismatches.length = 0;
  }

  /**
   * Up to when (at most `end`) the frees after t can be compared with those p earlier: not past a hole
   * shifted by p; -1 when the ones p earlier were dropped.
   */
  readable(t: number, p: number, end: number): number {
    if (t - p < this.forgotten) return -1;
    let limit = end;
    for (let k = 0; k < this.holes.length; k += 2) {
      const from = this.holes[k] ?? 0;
      if ((this.holes[k + 1] ?? 0) > t - p && from < end - p) limit = Math.min(limit, from + p);
    }
    return limit;
  }

  /** The permits counted at `t` (released to t) that leave by `until`. */
  leaving(t: number, until: number): number {
    let n = 0;
    for (let r = this.head; r < this.len; r++) {
      const start = this.start[r] ?? 0;
      if (start > until) break;
      const reps = this.reps[r] ?? 1;
      const upto = reps === 1 ? 1 : Math.min(reps, Math.floor((until - start) / (this.step[r] ?? 1)) + 1);
      n += (upto - (r === this.head ? this.gone : 0)) * (this.count[r] ?? 0);
    }
    return n;
  }

  /** The permit at the position (Infinity past the last), how many leave then, and the next position. */
  here(): number {
    return this.run < this.len ? this.at(this.run, this.rep) : Infinity;
  }
  hereCount(): number {
    return this.count[this.run] ?? 0;
  }
  next(): void {
    if (++this.rep >= (this.reps[this.run] ?? 1)) {
      this.run++;
      this.rep = 0;
    }
  }

  /** Moves the position (this.run, this.rep) to the first permit leaving after `t`. */
  seek(t: number): void {
    let lo = 0;
    let hi = this.len;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.last(mid) > t) hi = mid;
      else lo = mid + 1;
    }
    this.run = lo;
    const start = this.start[lo] ?? 0;
    this.rep = lo >= this.len || start > t ? 0 : Math.floor((t - start) / (this.step[lo] ?? 1)) + 1;
  }

  /**
   * How far past `t` (released to t) the permits leaving this window repeat those that left p earlier: the
   * largest R with the frees in (t, t + R] equal to those in (t - p, t + R - p] shifted by p. FULL when
   * that holds up to t + window + 1 (every permit counted now) and no start permit can break it later,
   * so the whole log repeats; -1 when none of it can be read (dropped, or leapt over). Runs that go on
   * alike are compared whole.
   */
  extent(t: number, p: number): number {
    const end = t + this.windowMs + 1;
    const limit = this.readable(t, p, end);
    if (limit <= t) return -1;
    // A mismatch found at f stays the answer until t reaches it: the frees before t + window + 1 only
    // change by a shift (which forgets these).
    const known = this.mismatches.indexOf(p);
    if (known >= 0 && t < (this.mismatches[known + 1] ?? 0))
      return Math.min(limit, this.mismatches[known + 1] ?? 0) - 1 - t;
    const found = this.scan(t, p, end, limit);
    if (found < end - t && found < limit - t) {
      if (known >= 0) this.mismatches[known + 1] = t + found + 1;
      else this.mismatches.push(p, t + found + 1);
    }
    return found;
  }

  private scan(t: number, p: number, end: number, limit: number): number {
    this.seek(t - p);
    let u = this.run;
    let ur = this.rep;
    let v = this.head;
    let vr = this.gone;
    for (;;) {
      const fu = u < this.len ? this.at(u, ur) + p : Infinity;
      const fv = v < this.len ? this.at(v, vr) : Infinity;
      const f = Math.min(fu, fv);
      if (f > limit) {
        if (limit < end) return limit - t;
        return v < this.len || this.lastStart > end - p ? this.windowMs + 1 : FULL;
      }
      if (fu !== fv || this.count[u] !== this.count[v]) return f - 1 - t;
      let k = 1;
      const step = this.step[v] ?? 0;
      if (step > 0 && this.step[u] === step && (this.reps[u] ?? 1) > 1) {
        const ahead = Math.floor((limit - f) / step) + 1;
        k = Math.min((this.reps[u] ?? 1) - ur, (this.reps[v] ?? 1) - vr, ahead);
      }
      ur += k;
      vr += k;
      if (ur >= (this.reps[u] ?? 1)) {
        u++;
        ur = 0;
      }
      if (vr >= (this.reps[v] ?? 1)) {
        v++;
        vr = 0;
      }
    }
  }
}

/**
 * How far past `t` the frees of log a less those of log b (both released to t) repeat those p earlier, as
 * Log.extent, within the shorter window and up to `reach` (-1: unreadable).
 */
function differenceExtent(a: Log, b: Log, t: number, p: number, reach: number): number {
  const end = Math.min(t + Math.min(a.windowMs, b.windowMs) + 1, reach);
  const limit = Math.min(a.readable(t, p, end), b.readable(t, p, end));
  if (limit <= t) return -1;
  // Net frees by time, in order, without the times where they cancel out.
  const times = netTimes;
  const net = netCounts;
  times.length = net.length = 0;
  a.seek(t - p);
  b.seek(t - p);
  for (;;) {
    const time = Math.min(a.here(), b.here());
    if (time > limit) break;
    let d = 0;
    if (a.here() === time) {
      d += a.hereCount();
      a.next();
    }
    if (b.here() === time) {
      d -= b.hereCount();
      b.next();
    }
    if (d !== 0) {
      times.push(time);
      net.push(d);
    }
  }
  let u = 0;
  let v = 0;
  while (v < times.length && (times[v] ?? 0) <= t) v++;
  for (;;) {
    const fu = u < times.length ? (times[u] ?? 0) + p : Infinity;
    const fv = v < times.length ? (times[v] ?? 0) : Infinity;
    const f = Math.min(fu, fv);
    if (f > limit) return limit - t;
    if (fu !== fv || net[u] !== net[v]) return f - 1 - t;
    u++;
    v++;
  }
}

/** differenceExtent's buffers, kept between calls. */
const netTimes: number[] = [];
const netCounts: number[] = [];

/** A pacing bucket in GCRA form, with acquire.lua's comparison (lt_pace). */
class Bucket {
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

/** The run window, asked in increasing time (one interval cached). */
class RunWindow {
  private s = 0;
  private e = -Infinity;
  private asked = Infinity;
  private closedForGood = false;

  constructor(
    private readonly open: (t: number) => readonly [number, number] | null,
    readonly periodMs: number,
    readonly fromMs: number,
  ) {}

  /** c when open at c, else when it opens next; Infinity: never again (or an interval that is no answer). */
  at(c: number): number {
    if (c >= this.e || c < this.asked) {
      const iv = this.open(c);
      this.asked = c;
      this.closedForGood = !iv || !(iv[1] > c) || !(iv[1] > iv[0]);
      if (iv) [this.s, this.e] = iv;
    }
    if (this.closedForGood) return Infinity;
    return c >= this.s ? c : this.s;
  }

  /** The interval of the last answer. */
  get start(): number {
    return this.s;
  }
  get end(): number {
    return this.e;
  }

  /** Open time in [a, b) (walked interval by interval, whole periods at once when they repeat). */
  openTime(a: number, b: number): number {
    const p = this.periodMs;
    if (p > 0 && b - Math.max(a, this.fromMs) > 3 * p) {
      const from = Math.max(a, this.fromMs);
      const periods = Math.floor((b - from) / p) - 1;
      return this.walk(a, from) + periods * this.walk(from, from + p) + this.walk(from + periods * p, b);
    }
    return this.walk(a, b);
  }

  private walk(a: number, b: number): number {
    let total = 0;
    for (let x = a, i = 0; x < b; i++) {
      const s = this.at(x);
      if (s >= b) break;
      const e = Math.min(this.e, b);
      total += e - s;
      x = this.e;
      if (i > 100_000) return total + ((b - x) * total) / (x - a);
    }
    return total;
  }

  /** When `need` ms of open time after x have passed; Infinity: never. */
  after(x: number, need: number): number {
    const p = this.periodMs;
    if (p > 0 && x >= this.fromMs) {
      const per = this.walk(x, x + p);
      if (per <= 0) return Infinity;
      const periods = Math.floor(need / per) - 1;
      if (periods > 0) {
        x += periods * p;
        need -= periods * per;
      }
    }
    for (let i = 0; i < 1_000_000; i++) {
      const s = this.at(x);
      if (s === Infinity) return Infinity;
      if (this.e - s >= need) return s + need;
      need -= this.e - s;
      x = this.e;
    }
    return Infinity;
  }
}

/**
 * Spreads n permits over the tokens as acquire.lua grants them one at a time: each to the usable token
 * with the most window room left (first on a tie), a token being usable while its bucket allows (at most
 * caps[i] more) and it has room. Water-fill: every usable token comes down to a level L + 1 (or its cap),
 * then the first ones still at L + 1 take one more.
 */
function fill(rooms: readonly number[], caps: readonly number[], n: number, takes: number[]): void {
  const k = rooms.length;
  if (k === 1) {
    takes[0] = n;
    return;
  }
  if (n === 1) {
    let best = -1;
    for (let i = 0; i < k; i++) {
      takes[i] = 0;
      const room = rooms[i] ?? 0;
      if (room > 0 && (caps[i] ?? 0) > 0 && (best < 0 || room > (rooms[best] ?? 0))) best = i;
    }
    takes[best] = 1;
    return;
  }
  let lo = 0;
  let hi = 0;
  for (let i = 0; i < k; i++) hi = Math.max(hi, rooms[i] ?? 0);
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    let sum = 0;
    for (let i = 0; i < k; i++) sum += down(rooms[i] ?? 0, caps[i] ?? 0, mid);
    if (sum >= n) lo = mid;
    else hi = mid;
  }
  let rest = n;
  for (let i = 0; i < k; i++) rest -= takes[i] = down(rooms[i] ?? 0, caps[i] ?? 0, lo + 1);
  for (let i = 0; i < k && rest > 0; i++) {
    if (down(rooms[i] ?? 0, caps[i] ?? 0, lo) > (takes[i] ?? 0)) {
      takes[i] = (takes[i] ?? 0) + 1;
      rest--;
    }
  }
}

/** What a token with `room` and a bucket allowing `cap` takes to come down to `level`. */
function down(room: number, cap: number, level: number): number {
  return Math.min(room, cap, Math.max(0, room - level));
}

/** A history buffer kept between calls (simulate runs to the end synchronously; a nested call makes its own). */
let idleRows: Float64Array | undefined;

/** Columns of a History row (then per token what it took and how many since the start, per scope its window's count, its bucket's rel and reset). */
const TIME = 0;
const SIZE = 1;
const LEFT = 2;
/** The waits so far: ORG, TOKEN, PACE, CLOSED. */
const WAITS = 3;
/** The open interval that held the batch. */
const OPEN_START = 7;
const OPEN_END = 8;
/** After a leap of COUNT periods of PERIOD that repeated rows (ANCHOR, this row - 1], what it loosened. */
const ANCHOR = 9;
const PERIOD = 10;
const COUNT = 11;
const LOOSENED = 12;
/** The clauses of the row's decisions (of its leap's, after a leap) in History.clauses [from, to). */
const CLAUSES_FROM = 13;
const CLAUSES_TO = 14;
const COLUMNS = 15;

/**
 * The batches granted, with the state after each, one row per batch. The batches of a leap are not rows:
 * the row after it says which rows they repeated, and holds what is read through them (the clauses of
 * their decisions, what each token took, each bucket's tat from an empty start).
 */
class History {
  rows: Float64Array;
  size = 0;
  /** The last row that follows a leap. */
  lastGap = -1;
  readonly width: number;
  readonly totalsAt: number;
  readonly countsAt: number;
  readonly relsAt: number;
  readonly resetsAt: number;
  readonly clauses: number[] = [];

  constructor(readonly tokens: number) {
    this.width = COLUMNS + 5 * tokens + 3;
    this.totalsAt = COLUMNS + tokens;
    this.countsAt = COLUMNS + 2 * tokens;
    this.relsAt = COLUMNS + 3 * tokens + 1;
    this.resetsAt = COLUMNS + 4 * tokens + 2;
    this.rows = idleRows ?? new Float64Array(64 * this.width);
    idleRows = undefined;
  }

  /** Hands the buffer on to the next call. */
  done(): void {
    if (!idleRows || idleRows.length < this.rows.length) idleRows = this.rows;
  }

  /** A new row; returns where it starts. */
  add(): number {
    const at = this.size * this.width;
    if (at + this.width > this.rows.length) {
      const rows = new Float64Array(this.rows.length * 2);
      rows.set(this.rows);
      this.rows = rows;
    }
    this.size++;
    return at;
  }

  get(row: number, column: number): number {
    return this.rows[row * this.width + column] ?? 0;
  }
  time(row: number): number {
    return this.rows[row * this.width + TIME] ?? 0;
  }
  left(row: number): number {
    return this.rows[row * this.width + LEFT] ?? 0;
  }
  /** Whether a leap comes just before the row. */
  leapt(row: number): boolean {
    return (this.rows[row * this.width + ANCHOR] ?? -1) >= 0;
  }
  take(row: number, token: number): number {
    return this.rows[row * this.width + COLUMNS + token] ?? 0;
  }
  /** What scope s took in the batch: all of it for the organization. */
  took(row: number, s: number): number {
    return s === 0 ? this.get(row, SIZE) : this.take(row, s - 1);
  }

  /**
   * Batches i and j look alike: the same size and spread, after the same time since the row before, or
   * after the same leap (a stretch with a hiccup every so often repeats as leaps and a few batches).
   */
  alike(i: number, j: number): boolean {
    if (j < 1 || this.leapt(i) !== this.leapt(j) || !this.same(i, j)) return false;
    if (!this.leapt(i)) return this.time(i) - this.time(i - 1) === this.time(j) - this.time(j - 1);
    const a = i * this.width;
    const b = j * this.width;
    const rows = this.rows;
    return (
      rows[a + PERIOD] === rows[b + PERIOD] &&
      rows[a + COUNT] === rows[b + COUNT] &&
      i - (rows[a + ANCHOR] ?? 0) === j - (rows[b + ANCHOR] ?? 0)
    );
  }

  /** Batches i and j are the same size and spread alike. */
  same(i: number, j: number): boolean {
    if (this.get(i, SIZE) !== this.get(j, SIZE)) return false;
    for (let k = 0; k < this.tokens; k++) if (this.take(i, k) !== this.take(j, k)) return false;
    return true;
  }

  /**
   * Every decision of the batches after row j up to row i (the leapt ones included) keeps a constraint as
   * tight as it outside `loosened` (a bit set of constraints): loosening those changes none of them.
   */
  holds(j: number, i: number, loosened: number): boolean {
    const to = this.get(i, CLAUSES_TO);
    for (let c = this.get(j, CLAUSES_TO); c < to; c++)
      if (((this.clauses[c] ?? 0) & ~loosened) === 0) return false;
    return true;
  }

  /**
   * The clauses of a leap repeating rows (j, i] that loosened `loosened`: theirs, less what it loosened
   * (what stays tight in each repeat), once each.
   */
  leapClauses(j: number, i: number, loosened: number): void {
    const from = this.clauses.length;
    const to = this.get(i, CLAUSES_TO);
    for (let c = this.get(j, CLAUSES_TO); c < to; c++) {
      const clause = (this.clauses[c] ?? 0) & ~loosened;
      let seen = false;
      for (let d = from; d < this.clauses.length && !seen; d++) seen = this.clauses[d] === clause;
      if (!seen) this.clauses.push(clause);
    }
  }

  /** The permits scope s took from the batches after row j up to row i, the leapt ones included. */
  grants(s: number, j: number, i: number): number {
    if (s === 0) return this.left(j) - this.left(i);
    return this.get(i, this.totalsAt + s - 1) - this.get(j, this.totalsAt + s - 1);
  }

  /**
   * A bucket's tat (interval T) after the grants to scope s of the batches after row j up to row i, from
   * tat x: a grant of n at y sets tat = max(tat, y) + n T. Over a leap of m periods p repeating grants that
   * take K T and leave `reset` from an empty bucket, tat = max(x + m K T, reset + p + (m - 1) max(p, K T)).
   */
  replay(s: number, j: number, i: number, x: number, interval: number): number {
    for (let q = j + 1; q <= i; q++) {
      if (this.leapt(q)) {
        const took = this.grants(s, this.get(q, ANCHOR), q - 1) * interval;
        if (took <= 0) continue;
        const p = this.get(q, PERIOD);
        const reset = this.get(q, this.resetsAt + s);
        x = Math.max(x + this.get(q, COUNT) * took, reset + p + (this.get(q, COUNT) - 1) * Math.max(p, took));
        continue;
      }
      const n = this.took(q, s);
      if (n > 0) x = Math.max(x, this.time(q)) + n * interval;
    }
    return x;
  }
}

const ORG = 0;
const TOKEN = 1;
const PACE = 2;
const CLOSED = 3;

/** What a leap does to one window's log: shift it whole, or add the leapt grants to it. */
const SHIFT = 1;
const APPEND = 2;

/** What a period check did: nothing, leapt over periods, or finished the work. */
const NONE = 0;
const LEAPT = 1;
const DONE = 2;

export function simulate(
  input: SimInput & { org: Unpaced; tokens: readonly Unpaced[]; open?: undefined },
): SimResult & {
  boundBy: 'org' | 'token' | 'none';
};
export function simulate(input: SimInput): SimResult;
export function simulate(input: SimInput): SimResult {
  if (input.remaining <= 0)
    return { finishMs: 0, waited: { org: 0, token: 0, pace: 0, closed: 0 }, boundBy: 'none', steps: 0 };
  const sim = new Sim(input);
  try {
    return sim.run();
  } finally {
    sim.history.done();
  }
}

/** A scope without a bucket: with no bucket and no run window, nothing else can hold the work back. */
type Unpaced = SimScope & { pace?: undefined };

/** The permits counted now in a window. */
function counted(frees: Frees): number {
  let sum = 0;
  for (const [at, n] of frees) if (at > 0 && n > 0) sum += n;
  return sum;
}

/**
 * The simulation. Scope 0 is the organization, scope 1 + i token i.
 *
 * Leaps rest on clauses. Each decision (when the next batch goes, how large it is, what each token takes)
 * records the constraints that were as tight as it: the window, bucket or run window whose time is the
 * one moved to, the room or allowance that equals what was granted, the tokens that must not allow one
 * earlier. Loosening a set of constraints (a bucket with more slack, a window with room to spare, a run
 * window that drifts) changes no decision as long as each keeps a tight constraint outside the set; a
 * block or the work left is never loosened, and a decision it ties needs no clause.
 */
class Sim {
  private readonly k: number;
  private readonly scopes: readonly PacedScope[];
  private readonly logs: Log[];
  private readonly buckets: (Bucket | null)[];
  /** The window can never fill before the work is done (limit >= counted + remaining): no log is kept. */
  private readonly unbounded: boolean[];
  /** A token never usable (blocked for good, no limit): its state never matters. */
  private readonly dead: boolean[];
  private readonly runWindow: RunWindow | null;
  readonly history: History;
  /** Periods tried at every batch: each window + 1 ms (a permit comes back that long after its grant), the run window's. */
  private readonly periods: number[];
  /** No period starts before this: blocks still to end, the run window's irregular start. */
  private readonly since: number;
  /** Clause bits: scope s's window 2s, its bucket 2s + 1, the run window 2k + 2 (none past 14 tokens: no loosening). */
  private readonly bits: boolean;
  private readonly runBit: number;

  private t = 0;
  private left: number;
  private finish = 0;
  private steps = 0;
  /** Waited so far: ORG, TOKEN, PACE, CLOSED. */
  private readonly waits = [0, 0, 0, 0];
  /** Clauses of the decisions since the last batch. */
  private readonly pending: number[] = [];
  /** When the tokens' rooms last chose who took what (a batch took less than they all allowed). */
  private chose = -Infinity;
  private choosing = false;
  /** What a leap being checked loosens (clause bits), does to each log (SHIFT, APPEND, 0), and sharedLeaps (-1: not yet). */
  private loosened = 0;
  private readonly mode: number[];
  private shared = -1;
  /** Whether the period being checked is a short one (see leap). */
  private short = false;
  /** Per slot of leap: the batch to try at next, the wait after a failure. */
  private readonly nextTry: number[];
  private readonly backoff: number[];
  /** Per window period, the first row at or after the current batch's time less the period. */
  private readonly anchors: number[];
  /** History.grants of the period being checked, per scope (NaN: not yet), and the periods it can use. */
  private readonly taken: number[];
  private most = 0;
  private stuckBy: SimBound = 'org';
  /** Set by decide: what the move waits for, the scope that decides it, the organization's time. */
  private cause = ORG;
  private decider = 0;
  private orgAt = 0;
  /** Set by locate. */
  private foundAt = 0;
  private readonly found = [0, 0, 0, 0];

  // Per batch and per move, reused.
  private readonly rooms: number[];
  private readonly caps: number[];
  private readonly takes: number[];
  private readonly windowAt: number[];
  private readonly bucketAt: number[];
  private readonly blockAt: number[];

  constructor(private readonly input: SimInput) {
    const scopes = (this.scopes = [input.org, ...input.tokens]);
    const k = (this.k = input.tokens.length);
    this.left = input.remaining;
    this.dead = scopes.map((s, i) => i > 0 && (s.blockedMs === Infinity || s.limit < 1));
    this.unbounded = scopes.map(
      (s, i) => (i === 0 || k === 1) && s.limit >= counted(s.frees) + input.remaining && s.limit < Infinity,
    );
    const openPeriod = input.open && (input.openPeriodMs ?? 0) > 0 ? (input.openPeriodMs ?? 0) : 0;
    const windows = scopes.filter((_, i) => !this.unbounded[i] && !this.dead[i]).map((s) => s.windowMs + 1);
    this.periods = [...new Set([...windows, ...(openPeriod > 0 ? [openPeriod] : [])])];
    const keepMs = Math.max(0, ...this.periods) + 1;
    this.logs = scopes.map((s) => new Log(s.limit, s.windowMs, s.frees, keepMs));
    this.buckets = scopes.map((s) => (s.pace ? new Bucket(s.pace) : null));
    const from = input.openPeriodFromMs ?? 0;
    this.runWindow = input.open ? new RunWindow(input.open, openPeriod, from) : null;
    const blocks = scopes.map((s) => (Number.isFinite(s.blockedMs) ? s.blockedMs : 0));
    this.since = Math.max(openPeriod > 0 ? from : -Infinity, ...blocks);
    this.history = new History(k);
    this.bits = k <= 14;
    this.runBit = this.bits ? 1 << (2 * k + 2) : 1;
    this.mode = scopes.map(() => 0);
    this.nextTry = [...this.periods, ...this.periods, 0].map(() => 0);
    this.backoff = [...this.periods, ...this.periods, 0].map(() => 1);
    this.anchors = this.periods.map(() => 0);
    this.taken = scopes.map(() => NaN);
    this.rooms = input.tokens.map(() => 0);
    this.caps = input.tokens.map(() => 0);
    this.takes = input.tokens.map(() => 0);
    this.windowAt = scopes.map(() => 0);
    this.bucketAt = scopes.map(() => 0);
    this.blockAt = scopes.map(() => 0);
  }

  run(): SimResult {
    for (;;) {
      this.release();
      const open = this.runWindow === null || this.runWindow.at(this.t) === this.t;
      if (open && this.batch() > 0) {
        if (this.left === 0) return this.result(this.finish);
        if (this.steps >= MAX_STEPS) return this.result(this.averagePace());
        if (this.leap()) return this.result(this.finish);
      }
      if (!this.advance()) return { ...this.result(Infinity), boundBy: this.stuckBy };
    }
  }

  private release(): void {
    for (let s = 0; s <= this.k; s++) if (!this.unbounded[s] && !this.dead[s]) this.logs[s]?.release(this.t);
  }

  /** Permits the scope's window takes now (0 while blocked; as many as are left when it cannot fill). */
  private roomOf(s: number): number {
    if (this.dead[s] || this.t < (this.scopes[s]?.blockedMs ?? 0)) return 0;
    return this.unbounded[s] ? this.left : (this.logs[s]?.room() ?? 0);
  }

  /** Clause bits (1 for any, past 14 tokens: only telling whether something is loosened). */
  private window(s: number): number {
    return this.bits ? 1 << (2 * s) : 1;
  }
  private bucket(s: number): number {
    return this.bits ? 1 << (2 * s + 1) : 1;
  }

  /** Grants every permit that fits now; returns how many. */
  private batch(): number {
    const t = this.t;
    const orgRoom = this.roomOf(0);
    if (orgRoom <= 0) return 0;
    const orgCap = this.buckets[0]?.allowance(t) ?? Infinity;
    let capSum = 0;
    for (let i = 0; i < this.k; i++) {
      const room = (this.rooms[i] = this.roomOf(i + 1));
      const cap = (this.caps[i] = this.dead[i + 1] ? 0 : (this.buckets[i + 1]?.allowance(t) ?? Infinity));
      capSum += Math.min(room, cap);
    }
    const n = Math.min(this.left, orgRoom, orgCap, capSum);
    if (!(n > 0)) return 0;
    fill(this.rooms, this.caps, n, this.takes);
    // Its size: the organization's room or allowance when the tokens allowed more (else their takes say it).
    if (this.bits && n < this.left && n < capSum)
      this.pending.push((orgRoom === n ? this.window(0) : 0) | (orgCap === n ? this.bucket(0) : 0));
    // With more allowed than granted, the tokens' rooms chose who took what (leapFrom: sharedLeaps).
    if (this.k > 1 && n < capSum) this.choosing = true;
    for (let i = 0; this.bits && i < this.k && n < this.left; i++) {
      const take = this.takes[i] ?? 0;
      if (this.dead[i + 1] || t < (this.input.tokens[i]?.blockedMs ?? 0)) continue;
      const window = this.rooms[i] === take ? this.window(i + 1) : 0;
      const held = window | (this.caps[i] === take ? this.bucket(i + 1) : 0);
      if (held !== 0) this.pending.push(held);
    }
    this.grant(n);
    this.record(n);
    return n;
  }

  private grant(n: number): void {
    const t = this.t;
    if (!this.unbounded[0]) this.logs[0]?.push(t + (this.scopes[0]?.windowMs ?? 0) + 1, n);
    this.buckets[0]?.take(t, n);
    for (let i = 0; i < this.k; i++) {
      const x = this.takes[i] ?? 0;
      if (x <= 0) continue;
      if (!this.unbounded[i + 1]) this.logs[i + 1]?.push(t + (this.scopes[i + 1]?.windowMs ?? 0) + 1, x);
      this.buckets[i + 1]?.take(t, x);
    }
    this.left -= n;
    this.finish = t;
    this.steps++;
  }

  /**
   * Records the batch at t, the state after it and the clauses of the decisions that led to it. After a
   * leap of m periods of p repeating rows (from, last row], that loosened `loosened`, says so.
   */
  private record(n: number, from = -1, p = 0, m = 0, loosened = 0): void {
    const h = this.history;
    const t = this.t;
    const at = h.add();
    const rows = h.rows;
    rows[at + TIME] = t;
    rows[at + SIZE] = n;
    rows[at + LEFT] = this.left;
    for (let w = 0; w < 4; w++) rows[at + WAITS + w] = this.waits[w] ?? 0;
    rows[at + OPEN_START] = this.runWindow?.start ?? -Infinity;
    rows[at + OPEN_END] = this.runWindow?.end ?? Infinity;
    rows[at + ANCHOR] = from;
    rows[at + PERIOD] = p;
    rows[at + COUNT] = m;
    rows[at + LOOSENED] = loosened;
    const row = h.size - 1;
    if (from >= 0) h.lastGap = row;
    rows[at + CLAUSES_FROM] = h.clauses.length;
    if (from >= 0) h.leapClauses(from, row - 1, loosened);
    for (const clause of this.pending) h.clauses.push(clause);
    rows[at + CLAUSES_TO] = h.clauses.length;
    this.pending.length = 0;
    for (let i = 0; i < this.k; i++) {
      rows[at + COLUMNS + i] = this.takes[i] ?? 0;
      // Taken since the start: after a leap, m more periods of the repeated rows.
      const before = row > 0 ? h.get(row - 1, h.totalsAt + i) : 0;
      const period = from >= 0 ? before - h.get(from, h.totalsAt + i) : (this.takes[i] ?? 0);
      rows[at + h.totalsAt + i] = before + (from >= 0 ? m * period : period);
    }
    for (let s = 0; s <= this.k; s++) {
      const b = this.buckets[s];
      rows[at + h.countsAt + s] = this.logs[s]?.used ?? 0;
      rows[at + h.relsAt + s] = b?.rel(t) ?? NaN;
      if (b && from >= 0) rows[at + h.resetsAt + s] = h.replay(s, from, row - 1, -Infinity, b.interval);
    }
    if (this.choosing) this.chose = t;
    this.choosing = false;
  }

  /** Moves to when the next permit can go (false: never), and books the wait to what it waited for. */
  private advance(): boolean {
    const t = this.t;
    for (let s = 0; s <= this.k; s++) {
      const blocked = this.scopes[s]?.blockedMs ?? 0;
      const log = this.logs[s] as Log;
      this.windowAt[s] = this.unbounded[s] ? -Infinity : this.dead[s] ? Infinity : log.roomAt(t);
      this.bucketAt[s] = this.buckets[s]?.allowAt(t) ?? -Infinity;
      this.blockAt[s] = blocked > t ? blocked : -Infinity;
    }
    let at = this.decide();
    if (at === Infinity) {
      this.stuckBy = this.orgAt === Infinity ? 'org' : 'token';
      return false;
    }
    // Only at a closed start can everything allow a permit now; anything else would be a bug: move on.
    if (at <= t) at = this.runWindow !== null && this.runWindow.at(t) > t ? t : t + 1;
    else this.movedBy(at);
    const opens = this.runWindow ? this.runWindow.at(at) : at;
    if (opens === Infinity) {
      this.stuckBy = 'run-window';
      return false;
    }
    if (opens > at && this.bits) this.pending.push(this.runBit);
    this.waits[this.cause] = (this.waits[this.cause] ?? 0) + (at - t);
    this.waits[CLOSED] = (this.waits[CLOSED] ?? 0) + (opens - at);
    this.t = opens;
    return true;
  }

  /**
   * When the next permit can go by the windows, buckets and blocks: the organization's, and the token's
   * that allows one first. Sets this.cause to what it waits for (a bucket when it is what allows last,
   * else the window or block) and this.decider to the scope that decides.
   */
  private decide(): number {
    const { windowAt, bucketAt, blockAt } = this;
    const orgAt = (this.orgAt = Math.max(windowAt[0] ?? 0, bucketAt[0] ?? 0, blockAt[0] ?? 0));
    let tokenAt = Infinity;
    let first = 1;
    for (let s = 1; s <= this.k; s++) {
      const at = Math.max(windowAt[s] ?? 0, bucketAt[s] ?? 0, blockAt[s] ?? 0);
      if (at < tokenAt) {
        tokenAt = at;
        first = s;
      }
    }
    const s = (this.decider = orgAt >= tokenAt ? 0 : first);
    const paced = (bucketAt[s] ?? 0) > Math.max(windowAt[s] ?? 0, blockAt[s] ?? 0);
    this.cause = paced ? PACE : s === 0 ? ORG : TOKEN;
    return Math.max(orgAt, tokenAt);
  }

  /**
   * The clauses of a move to `at`: what it waits for stays (the same time, booked alike), and when a token
   * decides, no other token may come to allow one first.
   */
  private movedBy(at: number): void {
    if (!this.bits) return;
    const x = this.decider;
    if (this.cause === PACE) this.pending.push(this.bucket(x));
    else if ((this.blockAt[x] ?? 0) !== at) this.pending.push(this.window(x));
    if (x === 0) return;
    for (let y = 1; y <= this.k; y++) {
      if (y === x || this.dead[y]) continue;
      // Tokens before the decider allow one later than it, those after it no earlier.
      const by = y < x ? at + 1 : at;
      if ((this.blockAt[y] ?? 0) >= by) continue;
      const window = (this.windowAt[y] ?? 0) >= by ? this.window(y) : 0;
      this.pending.push(window | ((this.bucketAt[y] ?? 0) >= by ? this.bucket(y) : 0));
    }
  }

  /**
   * Leaps over whole periods once the schedule repeats; true when that finished the work. A period p ends
   * at this batch (t) and starts after the batch at t - p (anchor), which is one of (slots, in order):
   * - a window + 1 ms or the run window's period back (tried at every batch that has one there): a permit
   *   comes back a window + 1 ms after its grant;
   * - the latest batch alike this one at least that far back: grants every g ms find their permits back
   *   at the first multiple of g past the window (a paced stretch drifting against the window);
   * - the latest of the last few batches alike this one: a paced stretch repeats within a few grants.
   * leapFrom says whether, and for how many periods, what follows t repeats what followed t - p. The last
   * two kinds are tried again after a failure only after twice as many batches as the last time.
   */
  private leap(): boolean {
    const slots = 2 * this.periods.length + 1;
    for (let x = 0; x < slots; x++) {
      if (this.steps < (this.nextTry[x] ?? 0)) continue;
      const j = this.anchor(x);
      if (j < 0) continue;
      this.short = x >= this.periods.length;
      const leapt = this.leapFrom(j, this.t - this.history.time(j));
      if (leapt !== NONE) {
        this.backoff[x] = 1;
        this.nextTry[x] = 0;
        return leapt === DONE;
      }
      if (this.short) {
        this.backoff[x] = Math.min(2 * (this.backoff[x] ?? 1), MAX_BACKOFF);
        this.nextTry[x] = this.steps + (this.backoff[x] ?? 1);
      }
    }
    return false;
  }

  /** The anchor row of slot x for a period ending at this batch (see leap), or -1. */
  private anchor(x: number): number {
    const h = this.history;
    const i = h.size - 1;
    const periods = this.periods;
    const p = periods[x % periods.length] ?? 0;
    if (x < 2 * periods.length) {
      // The first row at or after t - p (times only grow: the search goes on from where it stopped).
      let row = this.anchors[x % periods.length] ?? 0;
      while (row < i && h.time(row) < this.t - p) row++;
      this.anchors[x % periods.length] = row;
      if (x < periods.length) return h.time(row) === this.t - p && h.same(i, row) ? row : -1;
      // Strictly further back than p (p itself is the slot before), the first alike within a few rows.
      for (let j = row - 1; j >= 0 && j > row - 5; j--) if (h.alike(i, j)) return j;
      return -1;
    }
    for (let back = 1; back <= LOOKBACK && back <= i; back++) {
      if (!h.alike(i, i - back)) continue;
      return periods.includes(this.t - h.time(i - back)) ? -1 : i - back;
    }
    return -1;
  }

  /**
   * The decisions after t repeat those after t - p (batch j) for m periods when, by induction over the
   * batches, every input to them does: the blocks are behind; each bucket is in the same state relative
   * to now, or is loosened (more slack, or less by the same amount each period while it still allows one
   * more after each batch); the run window repeats with p, or is loosened (every batch shifted stays inside
   * its interval); each window counts as many permits and those leaving it next leave as they did a period
   * before (Log.extent: for good, or for m periods), or is loosened: it keeps a permit of room through m
   * periods of grants (when the tokens' rooms chose who took what, they must also keep their differences).
   * The loosened ones must have decided nothing alone in the period (History.holds). The period that
   * finishes the work is read off the last one.
   */
  private leapFrom(j: number, p: number): number {
    const h = this.history;
    if (this.t - p < this.since) return NONE;
    const grants = h.left(j) - this.left;
    if (!(grants > 0)) return NONE;
    const gap = h.lastGap > j;
    // More periods than the work fills are never needed (one more is read off to finish).
    this.most = Math.floor((this.left - 1) / grants) + 1;
    this.shared = -1;
    this.loosened = 0;
    this.taken.fill(NaN);
    let m = Math.min(this.bucketLeaps(j, p, gap), this.openLeaps(j, p, gap));
    // Tokens first: their logs are short, the organization's may hold a day of grants.
    for (let s = this.k; s >= 0 && m >= 1; s--) m = Math.min(m, this.windowLeaps(s, j, p, grants, false));
    for (let s = this.k; s >= 0 && m >= 1; s--) m = Math.min(m, this.windowLeaps(s, j, p, grants, true));
    if (!(m >= 1)) return NONE;
    if (this.loosened !== 0 && !(this.bits && h.holds(j, h.size - 1, this.loosened))) return NONE;
    const whole = Math.floor((this.left - 1) / grants);
    if (m > whole) {
      this.finishFrom(j, p, whole, grants);
      return DONE;
    }
    if (whole < 1) return NONE;
    this.leapBy(j, p, Math.min(m, whole), grants);
    return LEAPT;
  }

  /** Periods the buckets repeat for (see leapFrom), loosening those whose state changes. */
  private bucketLeaps(j: number, p: number, gap: boolean): number {
    const h = this.history;
    const i = h.size - 1;
    let m = Infinity;
    for (let s = 0; s <= this.k; s++) {
      const b = this.buckets[s];
      if (!b) continue;
      const now = h.get(i, h.relsAt + s);
      const then = h.get(j, h.relsAt + s);
      if (Math.abs(now - then) <= SAME_TAT) continue;
      this.loosened |= this.bucket(s);
      if (now < then) continue;
      // Its tat gains (now - then) on the clock each period: it still allows one more after a batch while
      // its rel there stays within tau (read from the rows: none may be missing).
      if (gap) return 0;
      for (let q = j + 1; q <= i; q++)
        m = Math.min(m, Math.floor((b.tau + PACE_EPSILON - h.get(q, h.relsAt + s)) / (now - then)));
    }
    return m;
  }

  /**
   * Periods the run window lets through unchanged: Infinity when its own period divides p; else, loosened,
   * while every batch shifted stays inside the interval that held it (when the intervals repeat, that is
   * its place in the run window's period, which moves by p mod the period, forth or back).
   */
  private openLeaps(j: number, p: number, gap: boolean): number {
    const run = this.runWindow;
    if (!run) return Infinity;
    const period = run.periodMs;
    const drift = period > 0 ? p % period : p;
    if (drift === 0) return Infinity;
    if (gap) return 0;
    this.loosened |= this.runBit;
    const h = this.history;
    let m = Infinity;
    for (let q = j + 1; q < h.size; q++) {
      const time = h.time(q);
      const ahead = Math.floor((h.get(q, OPEN_END) - 1 - time) / drift);
      const back =
        period > 0 ? Math.floor((time - Math.max(h.get(q, OPEN_START), run.fromMs)) / (period - drift)) : 0;
      m = Math.min(m, Math.max(ahead, back));
    }
    return m;
  }

  /**
   * Periods the window of scope s repeats for, and how (this.mode[s]). The first pass looks at the counts
   * alone (cheap), the second scans the logs whose counts match.
   */
  private windowLeaps(s: number, j: number, p: number, grants: number, scan: boolean): number {
    if (this.unbounded[s] || this.dead[s]) {
      this.mode[s] = 0;
      return Infinity;
    }
    const h = this.history;
    const count = h.get(h.size - 1, h.countsAt + s);
    const same = count === h.get(j, h.countsAt + s);
    if (same !== scan) return same ? Infinity : this.roomLeaps(s, j, p, count, grants);
    const extent = (this.logs[s] as Log).extent(this.t, p);
    this.mode[s] = extent === FULL ? SHIFT : APPEND;
    const periods = extent < 0 ? 0 : Math.floor(extent / p);
    const loosened = this.loosened;
    const spare = this.roomLeaps(s, j, p, count, grants);
    if (spare > periods) return spare;
    // Repeating for fewer periods, but as it is: not loosened.
    this.loosened = loosened;
    return periods;
  }

  /**
   * Periods of grants a window takes keeping a permit of room, loosened (leapFrom). A token's room also
   * chooses which token takes a permit when a batch takes less than they all allow: then the rooms must
   * keep their differences too (sharedLeaps).
   */
  private roomLeaps(s: number, j: number, p: number, count: number, grants: number): number {
    this.mode[s] = APPEND;
    this.loosened |= this.window(s);
    // Only a short period is tried with the rooms' differences (its tries back off): a window's is tried at
    // every batch.
    const chose = s > 0 && this.k > 1 && this.chose > this.t - p;
    if (chose && !this.short) return 0;
    if (s > 0 && Number.isNaN(this.taken[s]))
      this.taken[s] = this.history.grants(s, j, this.history.size - 1);
    const taken = s > 0 ? (this.taken[s] ?? 0) : grants;
    const most = Math.floor(this.scopes[s]?.limit ?? 0) - 1;
    let m = taken > 0 ? Math.floor((most - count) / taken) : Infinity;
    // The permits counted now that leave meanwhile make room too: period r is fine while the count and r
    // periods of grants, less those that left before it began, stay within the limit. So m periods are
    // fine, and so are as many more as what leaves in them makes room for (up to what may be leapt).
    const log = this.logs[s] as Log;
    for (let more = m; more >= 0 && more < this.most;) {
      m = more;
      more = Math.floor((most - count + log.leaving(this.t, this.t + m * p)) / taken);
      if (more <= m) break;
    }
    return chose && m >= 1 ? Math.min(m, this.sharedLeaps(j, p, m)) : m;
  }

  /**
   * Periods the tokens' rooms keep the differences between them for: the frees to come of each token less
   * those of the first repeat those of a period before. With every room to spare, the same differences
   * choose the same tokens, and the rooms' common drift changes nothing.
   */
  private sharedLeaps(j: number, p: number, most: number): number {
    if (this.shared >= 0) return this.shared;
    const h = this.history;
    const i = h.size - 1;
    let m = Infinity;
    let first = -1;
    for (let s = 1; s <= this.k && m >= 1; s++) {
      if (this.dead[s]) continue;
      if (first < 0) {
        first = s;
        continue;
      }
      const now = h.get(i, h.countsAt + s) - h.get(i, h.countsAt + first);
      const then = h.get(j, h.countsAt + s) - h.get(j, h.countsAt + first);
      const reach = this.t + Math.min(m, most) * p;
      const extent =
        now === then ? differenceExtent(this.logs[s] as Log, this.logs[first] as Log, this.t, p, reach) : -1;
      m = Math.min(m, extent < 0 ? 0 : Math.floor(extent / p));
    }
    return (this.shared = m);
  }

  private leapBy(j: number, p: number, m: number, grants: number): void {
    const h = this.history;
    const i = h.size - 1;
    const t = this.t;
    const by = m * p;
    for (let s = 0; s <= this.k; s++) {
      this.leapBucket(s, j, p, m);
      if (this.mode[s] === SHIFT) this.logs[s]?.shift(by, t);
      else if (this.mode[s] === APPEND) this.append(s, j, p, m);
    }
    for (let w = 0; w < 4; w++) {
      const period = h.get(i, WAITS + w) - h.get(j, WAITS + w);
      this.waits[w] = (this.waits[w] ?? 0) + m * period;
    }
    this.t = t + by;
    this.left -= m * grants;
    this.finish = this.t;
    for (let x = 0; x < this.k; x++) this.takes[x] = h.take(i, x);
    const n = h.get(i, SIZE);
    this.release();
    this.runWindow?.at(this.t);
    this.record(n, j, p, m, this.loosened);
  }

  /** The work ends in the period after `whole` more: at its batch that grants the last permit. */
  private finishFrom(j: number, p: number, whole: number, grants: number): void {
    const h = this.history;
    const i = h.size - 1;
    this.locate(j, i, this.left - whole * grants);
    for (let w = 0; w < 4; w++) {
      const start = h.get(j, WAITS + w);
      const period = h.get(i, WAITS + w) - start;
      this.waits[w] = (this.waits[w] ?? 0) + whole * period + (this.found[w] ?? 0) - start;
    }
    this.finish = this.foundAt + (whole + 1) * p;
    this.left = 0;
  }

  /**
   * Finds the batch after row j (up to row i) that grants the need-th permit since it, the batches of the
   * leaps between included: sets foundAt (its time) and found (the waits after it).
   */
  private locate(j: number, i: number, need: number): void {
    const h = this.history;
    let q = j + 1;
    while (h.left(j) - h.left(q) < need && q < i) q++;
    const before = h.left(j) - h.left(q - 1);
    if (!h.leapt(q)) {
      this.foundAt = h.time(q);
      for (let w = 0; w < 4; w++) this.found[w] = h.get(q, WAITS + w);
      return;
    }
    // Inside a leap of m periods of p repeating rows (from, q - 1]: period r, then the batch in it.
    const from = h.get(q, ANCHOR);
    const grants = h.left(from) - h.left(q - 1);
    const r = Math.ceil((need - before) / grants);
    this.locate(from, q - 1, need - before - (r - 1) * grants);
    this.foundAt += r * h.get(q, PERIOD);
    for (let w = 0; w < 4; w++) {
      const start = h.get(from, WAITS + w);
      const period = h.get(q - 1, WAITS + w) - start;
      this.found[w] = h.get(q - 1, WAITS + w) + (r - 1) * period + (this.found[w] ?? 0) - start;
    }
  }

  /** A bucket after m more periods of the same grants (History.replay). */
  private leapBucket(s: number, j: number, p: number, m: number): void {
    const b = this.buckets[s];
    if (!b) return;
    const h = this.history;
    const i = h.size - 1;
    if (Math.abs(h.get(i, h.relsAt + s) - h.get(j, h.relsAt + s)) <= SAME_TAT) {
      b.tat += m * p;
      return;
    }
    const took = h.grants(s, j, i) * b.interval;
    const reset = h.replay(s, j, i, -Infinity, b.interval);
    b.tat = Math.max(b.tat + m * took, reset + p + (m - 1) * Math.max(p, took));
  }

  /**
   * Adds m periods of the grants of the last one (after row j) to the log of scope s: one run when they
   * come evenly spaced (a paced stretch), else one by one (through the leaps in it too).
   */
  private append(s: number, j: number, p: number, m: number): void {
    const h = this.history;
    const log = this.logs[s] as Log;
    const after = (this.scopes[s]?.windowMs ?? 0) + 1;
    let first = 0;
    let last = 0;
    let spacing = 0;
    let size = 0;
    let batches = 0;
    let even = h.lastGap <= j;
    for (let q = j + 1; q < h.size && even; q++) {
      const x = h.took(q, s);
      if (x <= 0) continue;
      const time = h.time(q);
      if (batches === 0) [first, size] = [time, x];
      else if (x !== size || (batches > 1 && time - last !== spacing)) even = false;
      else spacing = time - last;
      last = time;
      batches++;
    }
    if (even && batches === 0) return;
    if (batches === 1) spacing = p;
    if (even && first + p - last === spacing) {
      log.pushRun(first + p + after, spacing, m * batches, size);
      return;
    }
    for (let r = 1; r <= m; r++) this.appendRows(s, j, h.size - 1, r * p + after, log);
  }

  /** Adds the grants to scope s of the batches after row j up to row i (the leapt ones too), `by` ms later, to log. */
  private appendRows(s: number, j: number, i: number, by: number, log: Log): void {
    const h = this.history;
    for (let q = j + 1; q <= i; q++) {
      if (h.leapt(q)) {
        // The leap's batches: its rows again, one period later each time (the last is row q itself).
        const from = h.get(q, ANCHOR);
        for (let r = 1; r <= h.get(q, COUNT); r++)
          this.appendRows(s, from, q - 1, by + r * h.get(q, PERIOD), log);
        continue;
      }
      const x = h.took(q, s);
      if (x > 0) log.push(h.time(q) + by, x);
    }
  }

  private result(finishMs: number): SimResult {
    const [org = 0, token = 0, pace = 0, closed = 0] = this.waits;
    const most = Math.max(org, token, pace, closed);
    const boundBy: SimBound =
      most === 0
        ? 'none'
        : org === most
          ? 'org'
          : token === most
            ? 'token'
            : pace === most
              ? 'pace'
              : 'run-window';
    return { finishMs, waited: { org, token, pace, closed }, boundBy, steps: this.steps };
  }

  /**
   * Past MAX_STEPS: the rest at the average pace so far, in open time when there is a run window (the
   * closed hours ahead count as they come, in proportion as they did: none of the work goes in them).
   */
  private averagePace(): number {
    const granted = this.input.remaining - this.left;
    if (!this.runWindow) return this.t + (this.t / granted) * this.left;
    const open = Math.max(1, this.runWindow.openTime(0, this.t));
    return this.runWindow.after(this.t, (open / granted) * this.left);
  }
}
