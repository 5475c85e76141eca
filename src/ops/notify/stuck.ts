// Which organizations are stuck (paused, blocked, every token refused), noted in memory when a permit is
// refused, and written at each tick (HSETNX: the first process sets an episode's start); an organization
// whose transfers were recorded since is stuck no more.
import { LASTING_SCOPES, type RefusalScope } from '../../limiter/kinds.ts';
import type { RedisClient } from '../../redis/client.ts';

/** Refusals that last until someone acts or a block ends: budget, pacing and run windows are not. */
const STUCK_SCOPES: ReadonlySet<RefusalScope> = new Set(LASTING_SCOPES);
/** Organizations remembered at most between two ticks (each is one field at the next write). */
const MAX_NOTED = 10_000;

export interface StuckEntry {
  sinceMs: number;
  scope: string;
  /** Said already (the event was submitted): not looked at again until the organization moves. */
  said: boolean;
}

export function parseStuck(text: string | undefined): StuckEntry | undefined {
  const [since, scope, said] = (text ?? '').split(' ');
  const sinceMs = Number(since);
  if (!Number.isFinite(sinceMs) || !scope) return undefined;
  return { sinceMs, scope, said: said === '1' };
}

export function formatStuck(e: StuckEntry): string {
  return `${e.sinceMs} ${e.scope} ${e.said ? 1 : 0}`;
}

export class StuckNotes {
  readonly #key: string;
  /** Held, noted since the last write. */
  readonly #stuck = new Map<string, StuckEntry>();
  /** Written by this process (so a later transfer of theirs removes them). */
  readonly #written = new Set<string>();
  /** Transfers recorded since the last write. */
  readonly #moved = new Set<string>();

  constructor(key: string) {
    this.#key = key;
  }

  /** A permit refused (no I/O: called on the transfer path). */
  refused(org: string, scope: RefusalScope, indefinite: boolean): void {
    if (!indefinite && !STUCK_SCOPES.has(scope)) return;
    if (this.#stuck.has(org) || this.#written.has(org) || this.#stuck.size >= MAX_NOTED) return;
    this.#stuck.set(org, {
      sinceMs: Date.now(),
      scope: indefinite && scope !== 'paused' ? 'all-tokens' : scope,
      said: false,
    });
    this.#moved.delete(org);
  }

  /**
   * A transfer of this organization was recorded: it moves (no I/O). Its hold is removed at the next
   * write whoever wrote it (a process since gone, say): one HDEL a tick for the organizations moved.
   */
  moved(org: string): void {
    this.#stuck.delete(org);
    if (this.#moved.size < MAX_NOTED) this.#moved.add(org);
  }

  /** Writes what was noted since the last call: nothing when nothing was. */
  async write(redis: RedisClient): Promise<void> {
    if (this.#moved.size > 0) {
      const orgs = [...this.#moved];
      this.#moved.clear();
      for (const org of orgs) this.#written.delete(org);
      await redis.hdel(this.#key, ...orgs);
    }
    if (this.#stuck.size > 0) {
      const stuck = [...this.#stuck];
      this.#stuck.clear();
      for (const [org, entry] of stuck) {
        await redis.hsetnx(this.#key, org, formatStuck(entry));
        this.#written.add(org);
      }
    }
  }
}
