// One claim per learner across organizations (decision 8): producers claim before they mark a
// learner queued; the worker checks the claim after taking the lease, before it sends.
import type { RedisClient } from '../redis/client.ts';
import { loadScripts } from '../redis/scripts.ts';
import type { Keys } from '../core/keys.ts';

export const CLAIM_SCRIPTS = loadScripts(new URL('./', import.meta.url), ['claim', 'release-claims']);
const CHUNK = 1000;

export type ClaimResult =
  { kind: 'ok' } | { kind: 'elsewhere'; holder: string } | { kind: 'moved'; from: string };

export class Claims {
  readonly #redis: RedisClient;
  readonly #key: string;

  constructor(redis: RedisClient, keys: Keys) {
    CLAIM_SCRIPTS.define(redis);
    this.#redis = redis;
    this.#key = keys.claims();
  }

  /**
   * Claims each learner for its organization, first claim wins, atomically per chunk. 'move'
   * takes learners claimed elsewhere: the caller checked none is in flight there.
   */
  async claim(
    items: readonly { org: string; learnerId: number }[],
    mode: 'claim' | 'move' = 'claim',
  ): Promise<ClaimResult[]> {
    const out: ClaimResult[] = [];
    for (let i = 0; i < items.length; i += CHUNK) {
      const args: string[] = [mode];
      for (let j = i; j < Math.min(items.length, i + CHUNK); j++) {
        const it = items[j] as { org: string; learnerId: number };
        args.push(String(it.learnerId), it.org);
      }
      const reply = (await CLAIM_SCRIPTS.run(this.#redis, 'claim', [this.#key], args)) as unknown[];
      for (const r of reply) out.push(parseClaim(String(r)));
    }
    return out;
  }

  /** Releases each learner's claim its organization still holds (`cancel`); returns how many. */
  async release(items: readonly { org: string; learnerId: number }[]): Promise<number> {
    let released = 0;
    for (let i = 0; i < items.length; i += CHUNK) {
      const args: string[] = [];
      for (const it of items.slice(i, i + CHUNK)) args.push(String(it.learnerId), it.org);
      released += Number(await CLAIM_SCRIPTS.run(this.#redis, 'release-claims', [this.#key], args));
    }
    return released;
  }

  /** The organization holding each learner (undefined: unclaimed). */
  async holders(learnerIds: readonly number[]): Promise<(string | undefined)[]> {
    const out: (string | undefined)[] = [];
    for (let i = 0; i < learnerIds.length; i += CHUNK) {
      const chunk = learnerIds.slice(i, i + CHUNK).map(String);
      if (chunk.length === 0) continue;
      for (const h of await this.#redis.hmget(this.#key, ...chunk)) out.push(h ?? undefined);
    }
    return out;
  }
}

function parseClaim(text: string): ClaimResult {
  // The script says 'held:' (its reply's word since the first release): claimed elsewhere.
  if (text.startsWith('held:')) return { kind: 'elsewhere', holder: text.slice(5) };
  if (text.startsWith('moved:')) return { kind: 'moved', from: text.slice(6) };
  return { kind: 'ok' };
}
