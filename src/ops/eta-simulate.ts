// The ETA's forward simulation of the limiter (src/limiter/acquire.lua): a sliding-window log per token
// and per organization. A permit is granted as soon as the organization's window and some token's window
// both have room, and leaves each window at its grant time + window + 1 ms (a log entry scored s counts
// while now <= s + window). The start is the budget now: the permits counted in each window and when they
// leave (peek.lua's frees), blocks, pauses, the limits in force. Grants are taken in batches (every
// permit that fits at one instant at once), and once the schedule repeats itself (the same windows, seen
// from the last grant, as one period earlier) whole periods are skipped: 1,000,000 learners cost what
// 2,000 do. Pure: no Redis, no clock.

/** [ms from now when these permits leave the window, how many]. */
export type Frees = ReadonlyArray<readonly [number, number]>;

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

  /** Its permits as seen from `t`: equal for two times when the window looks the same from both. */
  signature(t: number): string {
    let s = '';
    for (let i = this.head; i < this.at.length; i++) s += `${(this.at[i] ?? 0) - t}:${this.count[i]},`;
    return s;
  }
}

/** Grants `n` over the tokens, the one with the most room first (as acquire.lua spreads its load). */
function spread(tokens: Log[], rooms: number[], n: number, t: number): void {
  const order = rooms.map((_, i) => i).sort((a, b) => (rooms[b] ?? 0) - (rooms[a] ?? 0));
  const r = order.map((i) => rooms[i] ?? 0);
  // Water-fill: bring the k fullest down to one level L (some at L + 1) that uses exactly n.
  let k = 1;
  let sum = r[0] ?? 0;
  while (k < r.length && sum - k * (r[k] ?? 0) < n) sum += r[k++] ?? 0;
  const level = Math.floor((sum - n) / k);
  let extra = sum - n - level * k;
  for (let j = 0; j < k; j++) {
    const i = order[j] ?? 0;
    const take = (r[j] ?? 0) - level - (extra-- > 0 ? 1 : 0);
    const log = tokens[i] as Log;
    if (take > 0) log.push(t + log.windowMs + 1, take);
  }
}

/** A bound on the batches simulated; past it the rest goes at the average pace so far. */
const MAX_STEPS = 200_000;
/** States remembered to find a period (a schedule whose period is longer is simply simulated). */
const MAX_SEEN = 4_096;

export function simulate(input: SimInput): SimResult {
  const waited = { org: 0, token: 0 };
  let left = input.remaining;
  if (left <= 0) return { finishMs: 0, waited, boundBy: 'none', steps: 0 };
  const org = new Log(input.org.limit, input.org.windowMs, input.org.frees, input.org.blockedMs);
  const tokens = input.tokens.map((s) => new Log(s.limit, s.windowMs, s.frees, s.blockedMs));
  const seen = new Map<string, { t: number; left: number; org: number; token: number }>();
  let t = 0;
  let steps = 0;
  let finish = 0;
  while (left > 0) {
    org.release(t);
    for (const log of tokens) log.release(t);
    const orgRoom = org.room(t);
    const rooms = tokens.map((log) => log.room(t));
    const tokenRoom = rooms.reduce((a, b) => a + b, 0);
    const n = Math.min(left, orgRoom, tokenRoom);
    if (n > 0) {
      org.push(t + org.windowMs + 1, n);
      spread(tokens, rooms, n, t);
      left -= n;
      finish = t;
      if (left === 0) break;
      if (++steps >= MAX_STEPS) {
        finish = t + (t / (input.remaining - left)) * left;
        break;
      }
      const jump = periodJump(seen, org, tokens, t, left, waited);
      if (jump) {
        t += jump.ms;
        left -= jump.grants;
        org.shift(jump.ms);
        for (const log of tokens) log.shift(jump.ms);
        continue;
      }
    }
    const orgAt = org.nextRoom(t);
    const tokenAt = Math.min(...tokens.map((log) => log.nextRoom(t)));
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
 * After a grant at `t`: when every window looks as it did after an earlier grant (seen from that grant),
 * the schedule from here repeats the one from there. Skips as many whole periods as leave at least one
 * permit to simulate, and counts their waits; null when there is nothing to skip.
 */
function periodJump(
  seen: Map<string, { t: number; left: number; org: number; token: number }>,
  org: Log,
  tokens: Log[],
  t: number,
  left: number,
  waited: { org: number; token: number },
): { ms: number; grants: number } | null {
  // A block still ahead makes the future differ from the past: no period yet.
  if (t < org.blockedMs || tokens.some((log) => t < log.blockedMs && log.blockedMs !== Infinity)) return null;
  const key = [org, ...tokens].map((log) => log.signature(t)).join('|');
  const before = seen.get(key);
  if (!before) {
    if (seen.size < MAX_SEEN) seen.set(key, { t, left, org: waited.org, token: waited.token });
    return null;
  }
  const grants = before.left - left;
  const periods = Math.floor((left - 1) / grants);
  seen.clear();
  if (periods < 1) return null;
  waited.org += periods * (waited.org - before.org);
  waited.token += periods * (waited.token - before.token);
  return { ms: periods * (t - before.t), grants: periods * grants };
}
