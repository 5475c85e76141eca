// The time-based events (blocked too long, stalled), by one look per interval of one process of the
// fleet, at the candidates only: organizations stuck.ts noted, and lanes due long ago that nobody took.
import type { Keys } from '../../core/keys.ts';
import type { Logger } from '../../core/log.ts';
import type { TokenBook } from '../../core/token-book.ts';
import type { BudgetView, TransferBudget } from '../../limiter/index.ts';
import { progressOf } from '../../outcomes/run-progress.ts';
import type { RunCounts } from '../../outcomes/store.ts';
import { addReads, hashOf, readBatched } from '../../redis/batch.ts';
import type { RedisClient } from '../../redis/client.ts';
import { runWindowOf } from '../views/limits.ts';
import { formatStuck, parseStuck, type StuckEntry } from './stuck.ts';
import { orgBlocked, orgPaused, orgStalled, type NotifyEvent } from './events.ts';
import { BREAKER } from '../../limiter/breaker.ts';

export interface FleetWatchOptions {
  redis: RedisClient;
  keys: Keys;
  budget: TransferBudget;
  tokens: TokenBook;
  logger: Logger;
  /** NOTIFY_BLOCKED_AFTER and NOTIFY_STALL_AFTER (0: that event is off). */
  blockedAfterMs: number;
  stallAfterMs: number;
  submit(event: NotifyEvent): void;
}

/** Organizations looked at in one look at most (the rest wait for the next). */
const MAX_CANDIDATES = 100;

/** One look every this long: a sixth of the shorter delay, from 250 ms to 30 s. */
export function watchIntervalMs(blockedAfterMs: number, stallAfterMs: number): number {
  const on = [blockedAfterMs, stallAfterMs].filter((ms) => ms > 0);
  if (on.length === 0) return 0;
  return Math.min(30_000, Math.max(250, Math.floor(Math.min(...on) / 6)));
}

interface Candidate {
  org: string;
  stuck?: StuckEntry;
  /** The lane's due time, when it is a stall candidate. */
  dueAt?: number;
}

export class FleetWatch {
  readonly #o: FleetWatchOptions;
  readonly intervalMs: number;

  constructor(options: FleetWatchOptions) {
    this.#o = options;
    this.intervalMs = watchIntervalMs(options.blockedAfterMs, options.stallAfterMs);
  }

  /** One look, if this process has the fleet's turn. */
  async tick(): Promise<void> {
    const { redis, keys } = this.#o;
    if (this.intervalMs <= 0) return;
    // Shorter than the interval: the next turn is anyone's (a process that died holds none for long).
    const turn = await redis.set(
      keys.notifyTurn(),
      String(process.pid),
      'PX',
      Math.max(100, this.intervalMs - 100),
      'NX',
    );
    if (turn !== 'OK') return;
    const candidates = await this.#candidates(Date.now());
    if (candidates.length === 0) return;
    const orgs = candidates.map((c) => c.org);
    const [views, counts] = await Promise.all([
      this.#o.budget.peekMany(
        orgs.map((org) => ({ org, tokenIds: this.#o.tokens.tokensOf(org).map((t) => t.id) })),
      ),
      readBatched(
        redis,
        orgs.map((org) => ({
          slotKey: keys.orgCounts(org),
          add: (pipe) => addReads(pipe, [[keys.orgCounts(org), 'hgetall']]),
          read: (replies) => countsOf(hashOf((replies[0] as unknown[] | undefined)?.[0])),
        })),
      ),
    ]);
    for (const [i, c] of candidates.entries())
      await this.#judge(c, views[i] as BudgetView, counts[i] as RunCounts);
  }

  async #candidates(now: number): Promise<Candidate[]> {
    const { redis, keys, blockedAfterMs, stallAfterMs } = this.#o;
    const known = new Set(this.#o.tokens.orgs());
    const out = new Map<string, Candidate>();
    if (blockedAfterMs > 0) {
      for (const [org, text] of Object.entries(await redis.hgetall(keys.notifyStuck()))) {
        const stuck = parseStuck(text);
        if (!stuck || stuck.said || now - stuck.sinceMs < blockedAfterMs || !known.has(org)) continue;
        if (out.size < MAX_CANDIDATES) out.set(org, { org, stuck });
      }
    }
    if (stallAfterMs > 0) {
      const flat = await redis.zrangebyscore(
        keys.lanesDue(),
        '-inf',
        now - stallAfterMs,
        'WITHSCORES',
        'LIMIT',
        0,
        MAX_CANDIDATES,
      );
      for (let i = 0; i + 1 < flat.length; i += 2) {
        const org = flat[i] as string;
        if (!known.has(org) || out.size >= MAX_CANDIDATES) continue;
        out.set(org, { ...out.get(org), org, dueAt: Number(flat[i + 1]) });
      }
    }
    return [...out.values()];
  }

  async #judge(c: Candidate, view: BudgetView, learners: RunCounts): Promise<void> {
    const { redis, keys, blockedAfterMs, submit } = this.#o;
    const now = view.now;
    const waiting = progressOf(learners).waiting > 0;
    const paused = view.org.paused;
    const blocked = blockedBy(view);
    if (c.stuck) {
      // Moving again, or nothing left to wait: forgotten (a later hold is a new episode).
      if (!waiting || (!paused && !blocked)) {
        await redis.hdel(keys.notifyStuck(), c.org);
      } else if (paused) {
        // A halt of the error budget was said at once (org.halted): not again as paused too long.
        if (paused.who !== BREAKER && now - Date.parse(paused.at) >= blockedAfterMs) {
          submit(orgPaused(c.org, paused, learners, now));
          await redis.hset(keys.notifyStuck(), c.org, formatStuck({ ...c.stuck, said: true }));
        }
      } else if (blocked) {
        submit(orgBlocked(c.org, blocked, c.stuck.sinceMs, learners, now));
        await redis.hset(keys.notifyStuck(), c.org, formatStuck({ ...c.stuck, said: true }));
      }
    }
    // Due long ago and nobody took it, although it could send: a stall (the due time names the episode).
    if (c.dueAt !== undefined && waiting && !paused && !blocked && budgetThere(view)) {
      submit(orgStalled(c.org, c.dueAt, learners, now));
    }
  }
}

/** Why no transfer can be sent until someone acts or a block ends, or null. A pause is told apart. */
function blockedBy(view: BudgetView): string | null {
  if (view.org.blocked) return `the organization is blocked: ${view.org.blocked.reason}`;
  if (view.tokens.length === 0) return 'no token';
  if (view.tokens.every((t) => t.blocked || t.paused)) {
    const reasons = [...new Set(view.tokens.map((t) => (t.paused ? 'paused' : (t.blocked?.reason ?? ''))))];
    return `every token is paused or blocked (${reasons.join(', ')})`;
  }
  return null;
}

/** A permit could be granted now, by the windows and the run window (blocks and pauses are told apart). */
function budgetThere(view: BudgetView): boolean {
  if (view.org.remaining <= 0) return false;
  if (!view.tokens.some((t) => !t.blocked && !t.paused && t.remaining > 0)) return false;
  return runWindowOf(view, view.now)?.open ?? true;
}

function countsOf(h: Record<string, string>): RunCounts {
  const out: RunCounts = {};
  for (const [k, v] of Object.entries(h)) out[k as keyof RunCounts] = Number(v);
  return out;
}
