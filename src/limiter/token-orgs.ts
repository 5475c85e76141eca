// One token, one organization: each token id is bound in Redis to the first org key that used
// it, so a token given to two keys cannot have two windows and spend its hour twice.
import type { RedisClient } from '../redis/client.ts';
import type { TokenRef } from '../core/config.ts';
import { LearnerTransferError } from '../core/errors.ts';
import { createKeys } from '../core/keys.ts';
import type { Logger } from '../core/log.ts';
import { isWriteRefusal } from '../redis/refusals.ts';

export const TOKEN_ID_RE = /^[0-9a-f]{12}$/;

export interface BindOptions {
  /** Only check: write no binding (dry runs, plans). */
  dryRun?: boolean;
  /** Told when Redis refused to write the bindings (the check was still made). */
  logger?: Logger;
  /** Where the tokens were given, for the message (default LEARNER_API_TOKENS). */
  source?: string;
}

/** A token that Redis binds to another organization key than the one it is given to now. */
export interface BindConflict {
  token: Pick<TokenRef, 'id' | 'org'>;
  boundTo: string;
}

/**
 * Binds each token to its organization key (HSETNX: the first stays); LT_TOKEN_BOUND when one
 * is bound elsewhere. A refused write still compares the bindings there.
 */
export async function bindTokens(
  redis: RedisClient,
  prefix: string,
  tokens: readonly Pick<TokenRef, 'id' | 'org'>[],
  options: BindOptions = {},
): Promise<void> {
  const conflicts = await bindEach(redis, prefix, tokens, options);
  if (conflicts.length > 0) throw tokenBound(conflicts, options.source);
}

/**
 * bindTokens without the refusal: returns the tokens bound to another key, so a reload refuses
 * those alone.
 */
export async function bindEach(
  redis: RedisClient,
  prefix: string,
  tokens: readonly Pick<TokenRef, 'id' | 'org'>[],
  options: BindOptions = {},
): Promise<BindConflict[]> {
  if (tokens.length === 0) return [];
  const key = createKeys(prefix).tokenOrgs();
  const pipeline = redis.pipeline();
  if (!options.dryRun) for (const t of tokens) pipeline.hsetnx(key, t.id, t.org);
  pipeline.hmget(key, ...tokens.map((t) => t.id));
  const results = (await pipeline.exec()) ?? [];
  const last = results.at(-1);
  if (!last) throw new LearnerTransferError('LT_INTERNAL', 'bindTokens: no reply from Redis');
  const [readError, bound] = last;
  if (readError) throw readError;
  for (const [err] of results.slice(0, -1)) {
    if (!err) continue;
    const refusal = isWriteRefusal(err);
    if (!refusal) throw err;
    options.logger?.warn(
      { cause: refusal.cause },
      `could not record which organization each token belongs to (Redis refuses writes: ${refusal.cause}); ` +
        'the bindings already recorded were checked',
    );
    break;
  }
  const owners = bound as (string | null)[];
  const conflicts: BindConflict[] = [];
  tokens.forEach((token, i) => {
    const boundTo = owners[i] ?? null;
    if (boundTo !== null && boundTo !== token.org) conflicts.push({ token, boundTo });
  });
  return conflicts;
}

/** One sentence per conflict: the token's id, the key Redis binds it to, the one given. */
export function conflictSentence(c: BindConflict, source = 'LEARNER_API_TOKENS'): string {
  return (
    `token ${c.token.id} is bound to organization '${c.boundTo}' in Redis but ${source} gives it to ` +
    `'${c.token.org}'`
  );
}

function tokenBound(conflicts: BindConflict[], source = 'LEARNER_API_TOKENS'): Error {
  const first = conflicts[0]?.token;
  return new LearnerTransferError(
    'LT_TOKEN_BOUND',
    `${conflicts.map((c) => conflictSentence(c, source)).join('; ')}: one token, one organization (its hourly ` +
      `budget is per token). Fix ${source}, or, if the token now belongs to '${first?.org}', run ` +
      `'learner-transfer tokens rebind --token ${first?.id} --org ${first?.org}'.`,
  );
}

/** The organization key each token id is bound to. */
export async function tokenBindings(redis: RedisClient, prefix: string): Promise<Record<string, string>> {
  return redis.hgetall(createKeys(prefix).tokenOrgs());
}

/** Binds a token to another organization key; returns the key it was bound to (null: none). */
export async function rebindToken(
  redis: RedisClient,
  prefix: string,
  tokenId: string,
  org: string,
): Promise<string | null> {
  const key = createKeys(prefix).tokenOrgs();
  const [[getError, previous] = [], [setError] = []] =
    (await redis.multi().hget(key, tokenId).hset(key, tokenId, org).exec()) ?? [];
  if (getError) throw getError;
  if (setError) throw setError;
  return (previous as string | null | undefined) ?? null;
}
