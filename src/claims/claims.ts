// One claim per learner across organizations (architecture decision 8): under one prefix a learner
// belongs to at most one organization's work, queued, in progress or done. Producers claim before they
// mark a learner queued; the worker checks the claim after it took the learner's lease and before it
// sends, so a learner moved elsewhere on purpose is never called for by its old organization.
import { readFileSync } from 'node:fs';
import type { RedisClient } from '../redis/client.ts';
import type { Keys } from '../core/keys.ts';

const SCRIPT = readFileSync(new URL('./claim.lua', import.meta.url), 'utf8');
const CHUNK = 1000;

export type ClaimResult = { kind: 'ok' } | { kind: 'held'; holder: string } | { kind: 'moved'; from: string };

interface WithClaimCommand {
  ltClaim: (numKeys: number, ...args: string[]) => Promise<string[]>;
}

export class Claims {
  readonly #redis: RedisClient & WithClaimCommand;
  readonly #key: string;

  constructor(redis: RedisClient, keys: Keys) {
    if (!(redis as Partial<WithClaimCommand>).ltClaim) redis.defineCommand('ltClaim', { lua: SCRIPT });
    this.#redis = redis as RedisClient & WithClaimCommand;
    this.#key = keys.claims();
  }

  /**
   * Claims each learner for its organization, first claim wins, atomically per chunk (so two producers
   * racing cannot both win). 'move' gives learners held elsewhere to the new organization: the caller
   * has checked that nothing is in flight for them there.
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
      for (const r of await this.#redis.ltClaim(1, this.#key, ...args)) out.push(parseClaim(String(r)));
    }
    return out;
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
  if (text.startsWith('held:')) return { kind: 'held', holder: text.slice(5) };
  if (text.startsWith('moved:')) return { kind: 'moved', from: text.slice(6) };
  return { kind: 'ok' };
}
