// The simulation's step: to the next instant a permit can go, granting every permit that fits
// and booking each wait to what it waited for. leap.ts adds the leaps.
import { Bucket } from './bucket.ts';
import { fill } from './fill.ts';
import {
  ANCHOR,
  CLAUSES_FROM,
  CLAUSES_TO,
  COLUMNS,
  COUNT,
  History,
  LEFT,
  LOOSENED,
  OPEN_END,
  OPEN_START,
  PERIOD,
  SIZE,
  TIME,
  WAIT_COUNT,
  WAITS,
} from './history.ts';
import type { Frees, PacedScope, SimBound, SimInput, SimResult } from './input.ts';
import { Log } from './log.ts';
import { RunWindow } from './open.ts';
import { ETA_BOUNDS, type EtaBound } from '../kinds.ts';

/**
 * The waits, by their place in ETA_BOUNDS: the organization's window, the tokens', a bucket, the
 * run window.
 */
const ORG = ETA_BOUNDS.indexOf('org');
const TOKEN = ETA_BOUNDS.indexOf('token');
const PACE = ETA_BOUNDS.indexOf('pace');
const CLOSED = ETA_BOUNDS.indexOf('run-window');

/** A bound on the batches simulated; past it the rest goes at the average pace so far. */
const MAX_STEPS = 20_000;

/** The permits counted now in a window. */
function counted(frees: Frees): number {
  let sum = 0;
  for (const [at, n] of frees) if (at > 0 && n > 0) sum += n;
  return sum;
}

/**
 * The simulation. Scopes 0 to orgScopes - 1 are the organization's: its window, then the other
 * windows every grant counts in (SimInput.shared); scope orgScopes + i is token i.
 *
 * Leaps rest on clauses: each decision records the constraints as tight as it (the window,
 * bucket or run window whose time is moved to, a room equal to what was granted, the tokens
 * that must not allow one earlier). Loosening a set of constraints changes no decision while
 * each keeps a tight constraint outside the set; blocks and the work left are never loosened.
 */
export abstract class Stepper {
  protected readonly k: number;
  /** How many scopes every grant counts in (the organization's), before the tokens. */
  protected readonly orgScopes: number;
  protected readonly scopes: readonly PacedScope[];
  /** Per organization's scope, the wait its window books (a place in ETA_BOUNDS). */
  protected readonly waitOf: readonly number[];
  protected readonly logs: Log[];
  protected readonly buckets: (Bucket | null)[];
  /** The window can never fill before the work is done: no log is kept. */
  protected readonly unbounded: boolean[];
  /** A token never usable (blocked for good, no limit): its state never matters. */
  protected readonly dead: boolean[];
  protected readonly runWindow: RunWindow | null;
  readonly history: History;
  /** Periods tried at every batch: each window + 1 ms, and the run window's. */
  protected readonly periods: number[];
  /** No period starts before this: blocks still to end, the run window's irregular start. */
  protected readonly since: number;
  /**
   * Clause bits: scope s's window 2s, its bucket 2s + 1, the run window after them (none past 15
   * scopes).
   */
  protected readonly bits: boolean;
  protected readonly runBit: number;

  protected t = 0;
  protected left: number;
  protected finish = 0;
  protected steps = 0;
  /** Waited so far, by bound (in ETA_BOUNDS's order). */
  protected readonly waits: number[] = ETA_BOUNDS.map(() => 0);
  /** Clauses of the decisions since the last batch. */
  protected readonly pending: number[] = [];
  /** When the tokens' rooms last chose who took what (a batch took less than they all allowed). */
  protected chose = -Infinity;
  protected choosing = false;
  protected stuckBy: EtaBound = 'org';
  /**
   * Set by decide: what the move waits for, the scope that decides it, the organization's
   * scopes' time and the one of them that sets it.
   */
  protected cause = ORG;
  protected decider = 0;
  protected orgAt = 0;
  protected orgBy = 0;

  // Per batch and per move, reused.
  protected readonly orgRooms: number[];
  protected readonly orgCaps: number[];
  protected readonly rooms: number[];
  protected readonly caps: number[];
  protected readonly takes: number[];
  protected readonly windowAt: number[];
  protected readonly bucketAt: number[];
  protected readonly blockAt: number[];

  constructor(private readonly input: SimInput) {
    const shared = input.shared ?? [];
    const scopes = (this.scopes = [input.org, ...shared, ...input.tokens]);
    const k = (this.k = input.tokens.length);
    const g = (this.orgScopes = 1 + shared.length);
    this.waitOf = [ORG, ...shared.map((s) => ETA_BOUNDS.indexOf(s.bound))];
    this.left = input.remaining;
    this.dead = scopes.map((s, i) => i >= g && (s.blockedMs === Infinity || s.limit < 1));
    this.unbounded = scopes.map(
      (s, i) => (i < g || k === 1) && s.limit >= counted(s.frees) + input.remaining && s.limit < Infinity,
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
    this.history = new History(k, g);
    this.bits = scopes.length <= 15;
    this.runBit = this.bits ? 1 << (2 * scopes.length) : 1;
    this.orgRooms = this.waitOf.map(() => 0);
    this.orgCaps = this.waitOf.map(() => 0);
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

  /** Leaps over whole periods once the schedule repeats; true when that finished the work. */
  protected abstract leap(): boolean;

  protected release(): void {
    for (let s = 0; s < this.scopes.length; s++)
      if (!this.unbounded[s] && !this.dead[s]) this.logs[s]?.release(this.t);
  }

  /**
   * Permits the scope's window takes now (0 while blocked; all that are left when it cannot
   * fill).
   */
  protected roomOf(s: number): number {
    if (this.dead[s] || this.t < (this.scopes[s]?.blockedMs ?? 0)) return 0;
    return this.unbounded[s] ? this.left : (this.logs[s]?.room() ?? 0);
  }

  /** Clause bits (1 for any, past 15 scopes: only telling whether something is loosened). */
  protected window(s: number): number {
    return this.bits ? 1 << (2 * s) : 1;
  }
  protected bucket(s: number): number {
    return this.bits ? 1 << (2 * s + 1) : 1;
  }

  /** Grants every permit that fits now; returns how many. */
  protected batch(): number {
    const t = this.t;
    const g = this.orgScopes;
    let orgRoom = Infinity;
    let orgCap = Infinity;
    for (let s = 0; s < g; s++) {
      orgRoom = Math.min(orgRoom, (this.orgRooms[s] = this.roomOf(s)));
      orgCap = Math.min(orgCap, (this.orgCaps[s] = this.buckets[s]?.allowance(t) ?? Infinity));
    }
    if (orgRoom <= 0) return 0;
    let capSum = 0;
    for (let i = 0; i < this.k; i++) {
      const room = (this.rooms[i] = this.roomOf(g + i));
      const cap = (this.caps[i] = this.dead[g + i] ? 0 : (this.buckets[g + i]?.allowance(t) ?? Infinity));
      capSum += Math.min(room, cap);
    }
    const n = Math.min(this.left, orgRoom, orgCap, capSum);
    if (!(n > 0)) return 0;
    fill(this.rooms, this.caps, n, this.takes);
    // Its size: an organization's scope's room or allowance when the tokens allowed more.
    if (this.bits && n < this.left && n < capSum) this.pending.push(this.orgHeld(n));
    // With more allowed than granted, the tokens' rooms chose who took what (leapFrom: sharedLeaps).
    if (this.k > 1 && n < capSum) this.choosing = true;
    for (let i = 0; this.bits && i < this.k && n < this.left; i++) {
      const take = this.takes[i] ?? 0;
      if (this.dead[g + i] || t < (this.input.tokens[i]?.blockedMs ?? 0)) continue;
      const window = this.rooms[i] === take ? this.window(g + i) : 0;
      const held = window | (this.caps[i] === take ? this.bucket(g + i) : 0);
      if (held !== 0) this.pending.push(held);
    }
    this.grant(n);
    this.record(n);
    return n;
  }

  /** The clause of a batch of n that the organization's scopes' rooms or allowances held to n. */
  private orgHeld(n: number): number {
    let held = 0;
    for (let s = 0; s < this.orgScopes; s++)
      held |= (this.orgRooms[s] === n ? this.window(s) : 0) | (this.orgCaps[s] === n ? this.bucket(s) : 0);
    return held;
  }

  protected grant(n: number): void {
    const t = this.t;
    const g = this.orgScopes;
    for (let s = 0; s < g; s++) {
      if (!this.unbounded[s]) this.logs[s]?.push(t + (this.scopes[s]?.windowMs ?? 0) + 1, n);
      this.buckets[s]?.take(t, n);
    }
    for (let i = 0; i < this.k; i++) {
      const x = this.takes[i] ?? 0;
      if (x <= 0) continue;
      if (!this.unbounded[g + i]) this.logs[g + i]?.push(t + (this.scopes[g + i]?.windowMs ?? 0) + 1, x);
      this.buckets[g + i]?.take(t, x);
    }
    this.left -= n;
    this.finish = t;
    this.steps++;
  }

  /**
   * Records the batch at t, the state after it and its decisions' clauses (and a leap of m
   * periods, if one).
   */
  protected record(n: number, from = -1, p = 0, m = 0, loosened = 0): void {
    const h = this.history;
    const t = this.t;
    const at = h.add();
    const rows = h.rows;
    rows[at + TIME] = t;
    rows[at + SIZE] = n;
    rows[at + LEFT] = this.left;
    for (let w = 0; w < WAIT_COUNT; w++) rows[at + WAITS + w] = this.waits[w] ?? 0;
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
    for (let s = 0; s < this.scopes.length; s++) {
      const b = this.buckets[s];
      rows[at + h.countsAt + s] = this.logs[s]?.used ?? 0;
      rows[at + h.relsAt + s] = b?.rel(t) ?? NaN;
      if (b && from >= 0) rows[at + h.resetsAt + s] = h.replay(s, from, row - 1, -Infinity, b.interval);
    }
    if (this.choosing) this.chose = t;
    this.choosing = false;
  }

  /**
   * Moves to when the next permit can go (false: never), booking the wait to what it waited
   * for.
   */
  protected advance(): boolean {
    const t = this.t;
    for (let s = 0; s < this.scopes.length; s++) {
      const blocked = this.scopes[s]?.blockedMs ?? 0;
      const log = this.logs[s] as Log;
      this.windowAt[s] = this.unbounded[s] ? -Infinity : this.dead[s] ? Infinity : log.roomAt(t);
      this.bucketAt[s] = this.buckets[s]?.allowAt(t) ?? -Infinity;
      this.blockAt[s] = blocked > t ? blocked : -Infinity;
    }
    let at = this.decide();
    if (at === Infinity) {
      this.stuckBy = this.orgAt === Infinity ? this.boundOf(this.waitOf[this.orgBy] ?? ORG) : 'token';
      return false;
    }
    // Only at a closed start can everything allow a permit now; anything else is a bug: move
    // on.
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
   * When the next permit can go by the windows, buckets and blocks. Sets this.cause (a bucket
   * when it allows last, else the window or block) and this.decider.
   */
  protected decide(): number {
    const { windowAt, bucketAt, blockAt } = this;
    const g = this.orgScopes;
    // The organization's scopes allow one at the latest of their times (the first on a tie).
    let orgAt = Math.max(windowAt[0] ?? 0, bucketAt[0] ?? 0, blockAt[0] ?? 0);
    this.orgBy = 0;
    for (let s = 1; s < g; s++) {
      const at = Math.max(windowAt[s] ?? 0, bucketAt[s] ?? 0, blockAt[s] ?? 0);
      if (at > orgAt) [orgAt, this.orgBy] = [at, s];
    }
    this.orgAt = orgAt;
    let tokenAt = Infinity;
    let first = g;
    for (let s = g; s < this.scopes.length; s++) {
      const at = Math.max(windowAt[s] ?? 0, bucketAt[s] ?? 0, blockAt[s] ?? 0);
      if (at < tokenAt) {
        tokenAt = at;
        first = s;
      }
    }
    const s = (this.decider = orgAt >= tokenAt ? this.orgBy : first);
    const paced = (bucketAt[s] ?? 0) > Math.max(windowAt[s] ?? 0, blockAt[s] ?? 0);
    this.cause = paced ? PACE : s < g ? (this.waitOf[s] ?? ORG) : TOKEN;
    return Math.max(orgAt, tokenAt);
  }

  /**
   * The clauses of a move to `at`: what it waits for stays; when a token decides, no other may
   * allow one first.
   */
  protected movedBy(at: number): void {
    if (!this.bits) return;
    const x = this.decider;
    if (this.cause === PACE) this.pending.push(this.bucket(x));
    else if ((this.blockAt[x] ?? 0) !== at) this.pending.push(this.window(x));
    if (x < this.orgScopes) return;
    for (let y = this.orgScopes; y < this.scopes.length; y++) {
      if (y === x || this.dead[y]) continue;
      // Tokens before the decider allow one later than it, those after it no earlier.
      const by = y < x ? at + 1 : at;
      if ((this.blockAt[y] ?? 0) >= by) continue;
      const window = (this.windowAt[y] ?? 0) >= by ? this.window(y) : 0;
      this.pending.push(window | ((this.bucketAt[y] ?? 0) >= by ? this.bucket(y) : 0));
    }
  }

  protected result(finishMs: number): SimResult {
    const most = Math.max(...this.waits);
    // The waits in the order of ETA_BOUNDS: the first of the longest.
    const boundBy: EtaBound = most === 0 ? 'none' : this.boundOf(this.waits.indexOf(most));
    return { finishMs, waited: waitedBy(this.waits), boundBy, steps: this.steps };
  }

  private boundOf(wait: number): SimBound {
    return ETA_BOUNDS[wait] ?? 'org';
  }

  /**
   * Past MAX_STEPS: the rest at the average pace so far, in open time when there is a run
   * window.
   */
  protected averagePace(): number {
    const granted = this.input.remaining - this.left;
    if (!this.runWindow) return this.t + (this.t / granted) * this.left;
    const open = Math.max(1, this.runWindow.openTime(0, this.t));
    return this.runWindow.after(this.t, (open / granted) * this.left);
  }
}

/** The waits by bound (in ETA_BOUNDS's order): what SimResult.waited says. */
export function waitedBy(waits: readonly number[]): Record<SimBound, number> {
  return Object.fromEntries(ETA_BOUNDS.map((b, w) => [b, waits[w] ?? 0])) as Record<SimBound, number>;
}
