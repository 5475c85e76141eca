// The ETA's forward simulation of the limiter (src/limiter/acquire.lua): a sliding-window log per token
// and per organization. A permit is granted as soon as the organization's window and some token's window
// both have room, and leaves each window at its grant time + window + 1 ms (a log entry scored s counts
// while now <= s + window). The start is the budget now: the permits counted in each window and when they
// leave (peek-frees.lua), blocks, pauses, the limits in force. Grants are taken in batches (every
// permit that fits at one instant at once), and once the schedule repeats itself (the grants of the
// longest window just past are those of the one a period earlier, shifted by the period: an
// organization's or a token's window + 1 ms) whole periods are skipped: 1,000,000 learners cost what
// 20,000 do. Pure: no Redis, no clock.

import type { FreeStep } from '../limiter/budget-schedule.ts';

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

export interface SimInput {
  /** Permits still to be granted (learners to transfer). */
  remaining: number;
  org: SimScope;
  tokens: readonly SimScope[];
}

export interface SimResult {
  /** Ms from now until the last permit is granted; Infinity: never at these limits. */
  finishMs: number;
  /** Time spent waiting for the organization's window, and for the tokens' (blocks included). */
  waited: { org: number; token: number };
  /** Which wait was the longer: what holds the work back ('none': it fits the budget left now). */
  boundBy: 'org' | 'token' | 'none';
  /** Batches simulated (not skipped), for the bench. */
  steps: number;
}

/** A window's log: when its permits leave, in the order they leave (grants only append later ones). */
class Log {
  private at: number[] = [];
  private count: number[] = [];
  private head = 0;
  used = 0;

  constructor(
    readonly limit: number,
    readonly windowMs: number,
    frees: Frees,
    readonly blockedMs: number,
  ) {
    for (const [at, n] of [...frees].sort((a, b) => a[0] - b[0])) this.push(at, n);
  }

  push(at: number, n: number): void {
    const last = this.at.length - 1;
    if (last >= this.head && this.at[last] === at) this.count[last] = (this.count[last] ?? 0) + n;
    else {
      this.at.push(at);
      this.count.push(n);
    }
    this.used += n;
  }

  /** Lets go of every permit that has left the window by `t`. */
  release(t: number): void {
    while (this.head < this.at.length && (this.at[this.head] ?? Infinity) <= t) {
      this.used -= this.count[this.head] ?? 0;
      this.head++;
    }
    if (this.head > 1024 && this.head * 2 > this.at.length) {
      this.at = this.at.slice(this.head);
      this.count = this.count.slice(this.head);
      this.head = 0;
    }
  }

  room(t: number): number {
    return t < this.blockedMs ? 0 : Math.max(0, this.limit - this.used);
  }

  /** When it next has room after `t` (its block's end, or its next permit leaving); Infinity: never. */
  nextRoom(t: number): number {
    if (this.blockedMs === Infinity || this.limit <= 0) return Infinity;
    if (t < this.blockedMs) return this.blockedMs;
    return this.room(t) > 0 ? t : (this.at[this.head] ?? Infinity);
  }

  shift(by: number): void {
    for (let i = this.head; i < this.at.length; i++) this.at[i] = (this.at[i] ?? 0) + by;
  }
}

/**
 * Grants `n` over the tokens, the one with the most room first (as acquire.lua spreads its load); returns
 * what each token took, as text (two grants that spread alike leave the windows alike).
 */
function spread(tokens: Log[], rooms: number[], n: number, t: number): string {
  if (tokens.length === 1) {
    const log = tokens[0] as Log;
    log.push(t + log.windowMs + 1, n);
    return '';
  }
  const order = rooms.map((_, i) => i).sort((a, b) => (rooms[b] ?? 0) - (rooms[a] ?? 0));
  const r = order.map((i) => rooms[i] ?? 0);
  // Water-fill: bring the k fullest down to one level L (some at L + 1) that uses exactly n.
  let k = 1;
  let sum = r[0] ?? 0;
  while (k < r.length && sum - k * (r[k] ?? 0) < n) sum += r[k++] ?? 0;
  const level = Math.floor((sum - n) / k);
  let extra = sum - n - level * k;
  const takes = new Array<number>(tokens.length).fill(0);
  for (let j = 0; j < k; j++) {
    const i = order[j] ?? 0;
    const take = (r[j] ?? 0) - level - (extra-- > 0 ? 1 : 0);
    const log = tokens[i] as Log;
    if (take > 0) log.push(t + log.windowMs + 1, take);
    takes[i] = take;
  }
  return takes.join(',');
}

/** A bound on the batches simulated; past it the rest goes at the average pace so far. */
const MAX_STEPS = 20_000;

/** One batch granted, and where the simulation stood after it. */
interface Grant {
  t: number;
  n: number;
  /** What each token took (spread()). */
  takes: string;
  left: number;
  waitedOrg: number;
  waitedToken: number;
}

export function simulate(input: SimInput): SimResult {
  const waited = { org: 0, token: 0 };
  let left = input.remaining;
  if (left <= 0) return { finishMs: 0, waited, boundBy: 'none', steps: 0 };
  const org = new Log(input.org.limit, input.org.windowMs, input.org.frees, input.org.blockedMs);
  const tokens = input.tokens.map((s) => new Log(s.limit, s.windowMs, s.frees, s.blockedMs));
  const period = new PeriodFinder(input);
  let t = 0;
  let steps = 0;
  let finish = 0;
  const rooms = new Array<number>(tokens.length).fill(0);
  while (left > 0) {
    org.release(t);
    let tokenRoom = 0;
    for (let i = 0; i < tokens.length; i++) {
      const log = tokens[i] as Log;
      log.release(t);
      tokenRoom += rooms[i] = log.room(t);
    }
    const n = Math.min(left, org.room(t), tokenRoom);
    if (n > 0) {
      org.push(t + org.windowMs + 1, n);
      const takes = spread(tokens, rooms, n, t);
      left -= n;
      finish = t;
      if (left === 0) break;
      if (++steps >= MAX_STEPS) {
        finish = t + (t / (input.remaining - left)) * left;
        break;
      }
      const jump = period.add({ t, n, takes, left, waitedOrg: waited.org, waitedToken: waited.token });
      if (jump) {
        const times = Math.floor((left - 1) / jump.grants);
        if (times >= 1) {
          t += times * jump.ms;
          left -= times * jump.grants;
          waited.org += times * jump.waitedOrg;
          waited.token += times * jump.waitedToken;
          org.shift(times * jump.ms);
          for (const log of tokens) log.shift(times * jump.ms);
          period.clear();
          continue;
        }
      }
    }
    const orgAt = org.nextRoom(t);
    let tokenAt = Infinity;
    for (const log of tokens) tokenAt = Math.min(tokenAt, log.nextRoom(t));
    const next = Math.max(orgAt, tokenAt);
    if (next === Infinity)
      return { finishMs: Infinity, waited, boundBy: orgAt === Infinity ? 'org' : 'token', steps };
    if (orgAt >= tokenAt) waited.org += next - t;
    else waited.token += next - t;
    t = next;
  }
  const boundBy =
    waited.org === 0 && waited.token === 0 ? 'none' : waited.org >= waited.token ? 'org' : 'token';
  return { finishMs: finish, waited, boundBy, steps };
}

/**
 * Finds the period of a schedule from its grants. The windows after a grant at t hold exactly the permits
 * granted in (t - span, t] (span: the longest window + 2 ms), once the start's permits and every block
 * are behind. So when the grants of (t - span, t] are those of (t - span - p, t - p] shifted by p, the
 * windows at t are those at t - p shifted by p, and what follows t repeats what followed t - p. The
 * periods tried: each window + 1 ms (a permit comes back that long after its grant). Checked about four
 * times per span, so the cost stays linear in the grants simulated.
 */
class PeriodFinder {
  private readonly grants: Grant[] = [];
  private readonly span: number;
  private readonly since: number;
  private readonly periods: number[];
  private nextCheck: number;

  constructor(input: SimInput) {
    const scopes = [input.org, ...input.tokens];
    const finite = (ms: number) => (Number.isFinite(ms) ? ms : 0);
    this.span = Math.max(...scopes.map((s) => s.windowMs)) + 2;
    this.since = Math.max(...scopes.map((s) => Math.max(finite(s.blockedMs), ...s.frees.map(([at]) => at))));
    this.periods = [...new Set(scopes.map((s) => s.windowMs + 1))];
    this.nextCheck = this.since + Math.min(...this.periods);
  }

  clear(): void {
    this.grants.length = 0;
  }

  /** Records a grant; a period found: its length, grants and waits. */
  add(g: Grant): { ms: number; grants: number; waitedOrg: number; waitedToken: number } | null {
    this.grants.push(g);
    if (g.t < this.nextCheck) return null;
    this.nextCheck = g.t + this.span / 4;
    const cut = g.t - this.span - Math.max(...this.periods);
    let drop = 0;
    while (drop < this.grants.length && (this.grants[drop]?.t ?? 0) <= cut) drop++;
    if (drop > 0) this.grants.splice(0, drop - 1);
    for (const p of this.periods) {
      const before = this.repeats(p);
      if (before)
        return {
          ms: p,
          grants: before.left - g.left,
          waitedOrg: g.waitedOrg - before.waitedOrg,
          waitedToken: g.waitedToken - before.waitedToken,
        };
    }
    return null;
  }

  /** The grant at t - p when (t - span, t] repeats (t - span - p, t - p] shifted by p; else null. */
  private repeats(p: number): Grant | null {
    const list = this.grants;
    const last = list.length - 1;
    const t = list[last]?.t ?? 0;
    if (t - p < this.since) return null;
    let j = last;
    while (j >= 0 && (list[j]?.t ?? 0) > t - p) j--;
    const anchor = list[j];
    if (!anchor || anchor.t !== t - p) return null;
    for (let d = 0; ; d++) {
      const b = list[last - d];
      const a = list[j - d];
      const bIn = b !== undefined && b.t > t - this.span;
      const aIn = a !== undefined && a.t > t - p - this.span;
      // Both ranges end together, or one holds a grant the other has not.
      if (!bIn || !aIn) return bIn === aIn ? anchor : null;
      if (b.t - a.t !== p || b.n !== a.n || b.takes !== a.takes) return null;
    }
  }
}
