// The simulation's leaps: once the schedule repeats, whole periods are leapt over at once (a
// paced stretch costs a few batches, not one per grant); leapFrom says when a leap is exact.
import { PACE_EPSILON } from './bucket.ts';
import { ANCHOR, COUNT, OPEN_END, OPEN_START, PERIOD, SIZE, WAIT_COUNT, WAITS } from './history.ts';
import { differenceExtent, FULL, Log } from './log.ts';
import { Stepper } from './step.ts';

/**
 * Two bucket states closer than this (ms) are the same (their tats went through different
 * sums).
 */
const SAME_TAT = 1e-7;
/** Batches looked back at for a short period (a paced stretch repeats within a few grants). */
const LOOKBACK = 8;
/** At most this many batches between two tries of a period that failed before. */
const MAX_BACKOFF = 32;

/** What a leap does to one window's log: shift it whole, or add the leapt grants to it. */
const SHIFT = 1;
const APPEND = 2;

/** What a period check did: nothing, leapt over periods, or finished the work. */
const NONE = 0;
const LEAPT = 1;
const DONE = 2;

/** The simulation: the step (step.ts) with leaps over repeating periods. */
export class Sim extends Stepper {
  /**
   * A leap being checked: what it loosens (clause bits), does to each log, and sharedLeaps (-1:
   * not yet).
   */
  private loosened = 0;
  private readonly mode = this.scopes.map(() => 0);
  private shared = -1;
  /** Whether the period being checked is a short one (see leap). */
  private short = false;
  /** Per slot of leap: the batch to try at next, the wait after a failure. */
  private readonly nextTry = [...this.periods, ...this.periods, 0].map(() => 0);
  private readonly backoff = [...this.periods, ...this.periods, 0].map(() => 1);
  /** Per window period, the first row at or after the current batch's time less the period. */
  private readonly anchors = this.periods.map(() => 0);
  /**
   * History.grants of the period being checked, per scope (NaN: not yet), and its usable
   * periods.
   */
  private readonly taken = this.scopes.map(() => NaN);
  private most = 0;
  /** Set by locate. */
  private foundAt = 0;
  private readonly found: number[] = new Array<number>(WAIT_COUNT).fill(0);

  /**
   * Leaps over whole periods once the schedule repeats; true when that finished the work. A
   * period p ends at this batch (t) and starts after an anchor batch at t - p, one of (slots,
   * in order):
   * - a window + 1 ms, or the run window's period, back (a permit returns a window + 1 ms after);
   * - the latest batch alike this one at least that far back (grants every g ms drifting);
   * - the latest of the last few batches alike this one (a paced stretch).
   * The last two back off after a failure. leapFrom says whether, and for how many periods, it
   * repeats.
   */
  protected override leap(): boolean {
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
      // The first row at or after t - p (times only grow: the search resumes where it stopped).
      let row = this.anchors[x % periods.length] ?? 0;
      while (row < i && h.time(row) < this.t - p) row++;
      this.anchors[x % periods.length] = row;
      if (x < periods.length) return h.time(row) === this.t - p && h.same(i, row) ? row : -1;
      // Strictly further back than p, the first alike within a few rows.
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
   * The decisions after t repeat those after t - p (batch j) for m periods when, by induction
   * over the batches, every input does: the blocks are behind; each bucket is in the same state
   * relative to now, or loosened; the run window repeats with p, or is loosened; each window
   * counts as many permits and those leaving it next leave as a period before (Log.extent), or
   * is loosened (a permit of room through m periods). The loosened ones must have decided
   * nothing alone in the period (History.holds).
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
    const last = this.scopes.length - 1;
    for (let s = last; s >= 0 && m >= 1; s--) m = Math.min(m, this.windowLeaps(s, j, p, grants, false));
    for (let s = last; s >= 0 && m >= 1; s--) m = Math.min(m, this.windowLeaps(s, j, p, grants, true));
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
    for (let s = 0; s < this.scopes.length; s++) {
      const b = this.buckets[s];
      if (!b) continue;
      const now = h.get(i, h.relsAt + s);
      const then = h.get(j, h.relsAt + s);
      if (Math.abs(now - then) <= SAME_TAT) continue;
      this.loosened |= this.bucket(s);
      if (now < then) continue;
      // Its tat gains (now - then) each period: it still allows one more after a batch while
      // its rel there stays within tau.
      if (gap) return 0;
      for (let q = j + 1; q <= i; q++)
        m = Math.min(m, Math.floor((b.tau + PACE_EPSILON - h.get(q, h.relsAt + s)) / (now - then)));
    }
    return m;
  }

  /**
   * Periods the run window lets through unchanged: Infinity when its period divides p; else,
   * loosened, while every batch shifted stays inside the interval that held it.
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
   * Periods scope s's window repeats for, and how (this.mode[s]): counts first (cheap), then
   * the logs whose counts match.
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
   * Periods of grants a window takes keeping a permit of room, loosened. When a batch takes
   * less than the tokens allow, their rooms choose who takes it: then they must keep their
   * differences too (sharedLeaps).
   */
  private roomLeaps(s: number, j: number, p: number, count: number, grants: number): number {
    this.mode[s] = APPEND;
    this.loosened |= this.window(s);
    // Only a short period is tried with the rooms' differences (its tries back off).
    const token = s >= this.orgScopes;
    const chose = token && this.k > 1 && this.chose > this.t - p;
    if (chose && !this.short) return 0;
    if (token && Number.isNaN(this.taken[s]))
      this.taken[s] = this.history.grants(s, j, this.history.size - 1);
    const taken = token ? (this.taken[s] ?? 0) : grants;
    const most = Math.floor(this.scopes[s]?.limit ?? 0) - 1;
    let m = taken > 0 ? Math.floor((most - count) / taken) : Infinity;
    // Permits counted now that leave meanwhile make room too: period r is fine while the count
    // plus r periods of grants, less those that left before it, stays within the limit.
    const log = this.logs[s] as Log;
    for (let more = m; more >= 0 && more < this.most;) {
      m = more;
      more = Math.floor((most - count + log.leaving(this.t, this.t + m * p)) / taken);
      if (more <= m) break;
    }
    return chose && m >= 1 ? Math.min(m, this.sharedLeaps(j, p, m)) : m;
  }

  /**
   * Periods the tokens' rooms keep their differences for (each token's frees to come, less the
   * first's, repeat a period before): the same differences choose the same tokens.
   */
  private sharedLeaps(j: number, p: number, most: number): number {
    if (this.shared >= 0) return this.shared;
    const h = this.history;
    const i = h.size - 1;
    let m = Infinity;
    let first = -1;
    for (let s = this.orgScopes; s < this.scopes.length && m >= 1; s++) {
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
    for (let s = 0; s < this.scopes.length; s++) {
      this.leapBucket(s, j, p, m);
      if (this.mode[s] === SHIFT) this.logs[s]?.shift(by, t);
      else if (this.mode[s] === APPEND) this.append(s, j, p, m);
    }
    for (let w = 0; w < WAIT_COUNT; w++) {
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
    for (let w = 0; w < WAIT_COUNT; w++) {
      const start = h.get(j, WAITS + w);
      const period = h.get(i, WAITS + w) - start;
      this.waits[w] = (this.waits[w] ?? 0) + whole * period + (this.found[w] ?? 0) - start;
    }
    this.finish = this.foundAt + (whole + 1) * p;
    this.left = 0;
  }

  /**
   * Finds the batch after row j (up to row i, leaps included) that grants the need-th permit
   * since it: sets foundAt and found.
   */
  private locate(j: number, i: number, need: number): void {
    const h = this.history;
    let q = j + 1;
    while (h.left(j) - h.left(q) < need && q < i) q++;
    const before = h.left(j) - h.left(q - 1);
    if (!h.leapt(q)) {
      this.foundAt = h.time(q);
      for (let w = 0; w < WAIT_COUNT; w++) this.found[w] = h.get(q, WAITS + w);
      return;
    }
    // Inside a leap of m periods of p repeating rows (from, q - 1]: period r, then the batch in it.
    const from = h.get(q, ANCHOR);
    const grants = h.left(from) - h.left(q - 1);
    const r = Math.ceil((need - before) / grants);
    this.locate(from, q - 1, need - before - (r - 1) * grants);
    this.foundAt += r * h.get(q, PERIOD);
    for (let w = 0; w < WAIT_COUNT; w++) {
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
   * Adds m periods of the last period's grants (after row j) to scope s's log: one run when
   * evenly spaced, else one by one.
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

  /**
   * Adds the grants to scope s of the batches after row j up to row i (leapt ones too), `by` ms
   * later.
   */
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
}
