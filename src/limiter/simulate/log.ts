// A window's log in the simulation: when its permits leave, and how far its frees repeat a
// period's before.
import type { Frees } from './input.ts';

/** A log's whole state repeats (Log.extent). */
export const FULL = Infinity;

/**
 * A window's log: when its permits leave, as runs (`reps` times `count` permits, `step` ms
 * apart from `start`: a paced stretch is one run), the gone ones kept a while for Log.extent.
 */
export class Log {
  private readonly start: number[] = [];
  private readonly step: number[] = [];
  private readonly reps: number[] = [];
  private readonly count: number[] = [];
  /** Runs: the first still counted, and how many of its permits are gone. */
  private len = 0;
  private head = 0;
  private gone = 0;
  used = 0;
  /** Runs all gone by this time were dropped: no period reaching back further is checked. */
  private forgotten = -Infinity;
  /** (from, to] pairs of free times never recorded: leapt over by a shift. */
  private readonly holes: number[] = [];
  /** When the last permit counted at the start leaves: it is no grant's, so no period repeats it. */
  readonly lastStart: number;
  /**
   * Pairs (p, f): extent found a mismatch at f with the frees p earlier (forgotten on a shift).
   */
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

  /** Adds `reps` times n permits `step` ms apart from `at`, extending the last run when alike. */
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

  /** Lets go of every permit gone from the window by `t`; drops what no period check needs. */
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
   * The log `by` ms later, when its whole state repeats over a leap from `from`: the permits
   * counted move on, and the leap is a hole no later check may read.
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
   * Up to when (at most `end`) the frees after t can be compared with those p earlier (-1:
   * dropped).
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

  /**
   * The permit at the position (Infinity past the last), how many leave then, the next
   * position.
   */
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
   * How far past `t` this window's frees repeat those p earlier: the largest R with the frees
   * in (t, t + R] equal to those in (t - p, t + R - p] shifted by p. FULL when that holds to t
   * + window + 1 and no start permit can break it; -1 when unreadable.
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
 * How far past `t` the frees of log a less those of log b repeat those p earlier, as
 * Log.extent, within the shorter window and `reach`.
 */
export function differenceExtent(a: Log, b: Log, t: number, p: number, reach: number): number {
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
