// The time-based events: an organization paused or blocked longer than NOTIFY_BLOCKED_AFTER, and one
// where no learner finished for NOTIFY_STALL_AFTER although work and budget are there. No hook says
// "still": a look every interval does, by ONE process of the fleet (the turn: SET NX with an expiry), and
// only at the organizations with work. Those are the members of keys.lanesDue() (one read for the whole
// fleet: a drained lane leaves it), so an idle fleet of any size costs the turn, that read and the
// watch hash's read per interval, and nothing per organization. For the organizations with work, the
// limiter's peek and the learner counters are read in batches (one pipeline per Redis node), as
// `status` reads them. What the look remembers between two turns (the progress seen and since when)
// lives in keys.notifyWatch(), so whichever process takes the next turn goes on from it.
import type { Keys } from '../core/keys.ts';
import type { Logger } from '../core/log.ts';
import type { TokenBook } from '../core/token-book.ts';
import type { BudgetView, TransferBudget } from '../limiter/index.ts';
import { progressOf } from '../outcomes/run-progress.ts';
import type { RunCounts } from '../outcomes/store.ts';
import { CONTROL_LANE } from '../queue/lanes-due.ts';
import { addReads, hashOf, readBatched } from '../redis/batch.ts';
import type { RedisClient } from '../redis/client.ts';
import { runWindowOf } from './limits.ts';
import { orgBlocked, orgPaused, orgStalled, type NotifyEvent } from './notify-events.ts';

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

/** What the look remembers of an organization with work. */
interface Seen {
  /** Learners finished (done + failed): progress is this number moving. */
  progress: number;
  /** Since when the progress has not moved while work and budget were there (ms). */
  stillSince: number;
  /** Since when the organization is blocked (0: it is not). A pause has its own time. */
  heldSince: number;
}

const PAGE = 1000;

/** One look every this long: a sixth of the shorter delay, from 250 ms to 30 s. */
export function watchIntervalMs(blockedAfterMs: number, stallAfterMs: number): number {
  const on = [blockedAfterMs, stallAfterMs].filter((ms) => ms > 0);
  if (on.length === 0) return 0;
  return Math.min(30_000, Math.max(250, Math.floor(Math.min(...on) / 6)));
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
    const known = new Set(this.#o.tokens.orgs());
    const orgs = (await this.#lanesWithWork()).filter((l) => l !== CONTROL_LANE && known.has(l));
    const stored = await redis.hgetall(keys.notifyWatch());
    const gone = Object.keys(stored).filter((org) => !orgs.includes(org));
    if (gone.length > 0) await redis.hdel(keys.notifyWatch(), ...gone);
    if (orgs.length === 0) return;
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
    const next: Record<string, string> = {};
    orgs.forEach((org, i) => {
      const seen = this.#judge(org, views[i] as BudgetView, counts[i] as RunCounts, parse(stored[org]));
      const text = `${seen.progress} ${seen.stillSince} ${seen.heldSince}`;
      if (text !== stored[org]) next[org] = text;
    });
    if (Object.keys(next).length > 0) await redis.hset(keys.notifyWatch(), next);
  }

  #judge(org: string, view: BudgetView, learners: RunCounts, before: Seen | undefined): Seen {
    const { blockedAfterMs, stallAfterMs, submit } = this.#o;
    const now = view.now;
    const p = progressOf(learners);
    const progress = p.done + p.failed;
    const held = heldBy(view);
    const seen: Seen = {
      progress,
      stillSince: before && before.progress === progress ? before.stillSince : now,
      heldSince: held ? before?.heldSince || now : 0,
    };
    if (p.waiting === 0) return { ...seen, stillSince: now, heldSince: 0 };
    if (view.org.paused) {
      const since = Date.parse(view.org.paused.at);
      if (blockedAfterMs > 0 && now - since >= blockedAfterMs)
        submit(orgPaused(org, view.org.paused, learners, now));
      return { ...seen, stillSince: now, heldSince: 0 };
    }
    if (held) {
      if (blockedAfterMs > 0 && now - seen.heldSince >= blockedAfterMs) {
        submit(orgBlocked(org, held, seen.heldSince, learners, now));
      }
      return { ...seen, stillSince: now };
    }
    // Waiting for budget (the day spent, a closed run window) is no stall: the clock starts again.
    if (!budgetThere(view)) return { ...seen, stillSince: now };
    if (stallAfterMs > 0 && now - seen.stillSince >= stallAfterMs) {
      submit(orgStalled(org, seen.stillSince, learners, now));
    }
    return seen;
  }

  /** Every lane with work (one ZRANGE a page). */
  async #lanesWithWork(): Promise<string[]> {
    const out: string[] = [];
    for (let start = 0; ; start += PAGE) {
      const page = await this.#o.redis.zrange(this.#o.keys.lanesDue(), start, start + PAGE - 1);
      out.push(...page);
      if (page.length < PAGE) return out;
    }
  }
}

/** Why no transfer can be sent until someone acts or a block ends, or null. A pause is told apart. */
function heldBy(view: BudgetView): string | null {
  if (view.org.blocked) return `the organization is blocked: ${view.org.blocked.reason}`;
  if (view.tokens.length === 0) return 'no token';
  if (view.tokens.every((t) => t.blocked || t.paused)) {
    const reasons = [...new Set(view.tokens.map((t) => (t.paused ? 'paused' : (t.blocked?.reason ?? ''))))];
    return `every token is paused or blocked (${reasons.join(', ')})`;
  }
  return null;
}

/** A permit could be granted now, by the windows and the run window (blocks and pauses are held apart). */
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

function parse(text: string | undefined): Seen | undefined {
  if (!text) return undefined;
  const [progress, stillSince, heldSince] = text.split(' ').map(Number);
  if (![progress, stillSince, heldSince].every((n) => Number.isFinite(n))) return undefined;
  return { progress: progress as number, stillSince: stillSince as number, heldSince: heldSince as number };
}
