// The fleet's limits, one hash per organization (decision 10): its fields are listed in
// docs/limits.md, "The policy hash". Seeded from LIMIT_*, changed live by policy-control.ts.
import { formatRate, RATE_MAX_COUNT, RATE_MAX_WINDOW_MS, type Rate } from '../core/duration.ts';
import type { Keys } from '../core/keys.ts';
import type { Logger } from '../core/log.ts';
import type { RedisClient } from '../redis/client.ts';
import { readBatched } from '../redis/batch.ts';
import { decodeKinds, encodeRate, type PolicyValues } from './kinds.ts';
import type { PauseInfo } from './types.ts';
import { LearnerTransferError } from '../core/errors.ts';
import { encodeBurst, type Burst } from '../core/burst.ts';

/**
 * The longest a worker sleeps on a refusal, so a live change (`limits set`, `resume`) applies
 * within 5 s: BullMQ offers no way to cut a rate-limit sleep short from outside.
 */
export const POLICY_RECHECK_MS = 3_000;

/**
 * The policy stored for an organization: every kind's values, pauses, seeds, what 429s taught.
 */
export interface LimitPolicy extends PolicyValues {
  /** A policy hash exists (false: each process enforces its own LIMIT_*). */
  stored: boolean;
  paused: PauseInfo | null;
  /** Paused tokens (token id -> who and when). */
  pausedTokens: Record<string, PauseInfo>;
  /**
   * The LIMIT_* values the limits were seeded or last reset from; `set`: those the environment
   * set.
   */
  seededFrom: {
    LIMIT_PER_TOKEN: string;
    LIMIT_PER_ORG: string;
    set?: ('LIMIT_PER_TOKEN' | 'LIMIT_PER_ORG')[];
  } | null;
  /**
   * Limits learned from 429s as stored (max and when); peek reports the one in force, probed up
   * since.
   */
  learned: { tokens: Record<string, LearnedEntry>; org: LearnedEntry | null };
  /** The 429s answered per token (token id -> count), every process together. */
  rateLimited: Record<string, number>;
}

/** A learned limit as stored: "max at". */
export interface LearnedEntry {
  max: number;
  /** Redis ms. */
  at: number;
}

/** Fields the limiter writes from 429s (learn.lua), not limits anyone set. */
const LEARNED_FIELD = /^(learned:|429:|refuted:)/;

export function parseLearned(text: string | undefined): LearnedEntry | null {
  const m = /^(\d+) (\d+)$/.exec(text ?? '');
  return m ? { max: Number(m[1]), at: Number(m[2]) } : null;
}

export type LimitVariable = 'LIMIT_PER_TOKEN' | 'LIMIT_PER_ORG' | 'LIMIT_BURST';

/** The limits a process falls back to (its LIMIT_*). */
export interface FallbackLimits {
  limitPerToken: Rate;
  limitPerOrg: Rate;
  /** LIMIT_BURST (absent: no pacing unless the policy sets one). */
  burst?: Burst | null;
  /** The LIMIT_* the environment sets: only these are said to differ from Redis (absent: all). */
  limitVariablesSet?: readonly LimitVariable[] | undefined;
}

/** The limits in effect for one organization: the policy over the fallback. */
export interface EffectiveLimits {
  perOrg: Rate;
  perToken: Rate;
  reserve: number;
  /** What acquire grants per org window: perOrg.max less the reserve (0 or less: nothing). */
  orgUsable: number;
  /** A token's limit: its own, or the default per token. */
  token(tokenId: string): Rate;
}

export { decodeRate, encodeRate } from './kinds.ts';

/** A pause field's JSON ({who, at}); null when absent or empty. */
export function parsePause(text: string | undefined): PauseInfo | null {
  if (text === undefined || text === '') return null;
  try {
    const v = JSON.parse(text) as Partial<PauseInfo>;
    return {
      who: String(v.who ?? 'unknown'),
      at: String(v.at ?? ''),
      ...(typeof v.reason === 'string' && v.reason !== '' ? { reason: v.reason } : {}),
    };
  } catch {
    return { who: 'unknown', at: '' };
  }
}

/** The policy from the hash's fields (HGETALL). */
export function parsePolicy(hash: Record<string, string>): LimitPolicy {
  const pausedTokens: Record<string, PauseInfo> = {};
  const learnedTokens: Record<string, LearnedEntry> = {};
  const rateLimited: Record<string, number> = {};
  for (const [field, value] of Object.entries(hash)) {
    if (field.startsWith('learned:tok:')) {
      const l = parseLearned(value);
      if (l) learnedTokens[field.slice('learned:tok:'.length)] = l;
    } else if (field.startsWith('429:')) {
      const n = Number(value);
      if (Number.isSafeInteger(n) && n > 0) rateLimited[field.slice(4)] = n;
    } else if (field.startsWith('paused:')) {
      const p = parsePause(value);
      if (p) pausedTokens[field.slice(7)] = p;
    }
  }
  let seededFrom: LimitPolicy['seededFrom'] = null;
  if (hash.seededFrom !== undefined) {
    try {
      const s = JSON.parse(hash.seededFrom) as Record<string, unknown>;
      seededFrom = { LIMIT_PER_TOKEN: String(s.LIMIT_PER_TOKEN), LIMIT_PER_ORG: String(s.LIMIT_PER_ORG) };
      if (Array.isArray(s.set)) {
        seededFrom.set = SEED_VARIABLES.filter((v) => (s.set as unknown[]).includes(v));
      }
    } catch {
      seededFrom = null;
    }
  }
  return {
    stored: Object.keys(hash).some((field) => !LEARNED_FIELD.test(field)),
    ...decodeKinds(hash),
    paused: parsePause(hash.paused),
    pausedTokens,
    seededFrom,
    learned: { tokens: learnedTokens, org: parseLearned(hash['learned:org']) },
    rateLimited,
  };
}

export async function readPolicy(redis: RedisClient, keys: Keys, org: string): Promise<LimitPolicy> {
  return parsePolicy(await redis.hgetall(keys.policy(org)));
}

export function effectiveLimits(policy: LimitPolicy, fallback: FallbackLimits): EffectiveLimits {
  const perOrg = policy.perOrg ?? fallback.limitPerOrg;
  const perToken = policy.perToken ?? fallback.limitPerToken;
  return {
    perOrg,
    perToken,
    reserve: policy.reserve,
    orgUsable: perOrg.max - policy.reserve,
    token: (tokenId) => policy.tokens[tokenId] ?? perToken,
  };
}

/**
 * The error a worker logs when acquire.lua ignored a malformed stored rate: the organization,
 * the field, the value, what applies instead (its own LIMIT_*), and the fix.
 */
export function malformedPolicyError(
  org: string,
  field: string,
  value: string,
  fallback: FallbackLimits,
): { fields: Record<string, unknown>; msg: string } {
  const stored = value.length > 80 ? `${value.slice(0, 77)}...` : value;
  const tokenId = field.startsWith('tok:') ? field.slice(4) : null;
  if (field === 'runWindow') {
    return {
      fields: { org, field, stored: value.slice(0, 200), applied: 'closed, read again in an hour' },
      msg:
        `the run window stored in Redis for organization '${org}' cannot be read on this host (${value.slice(0, 200)}): ` +
        `no transfer is sent for an hour, then it is read again; set it again with 'learner-transfer limits set --org ${org} --run-window ... --tz ...' ` +
        `or remove it with 'limits reset --org ${org} --run-window'`,
    };
  }
  if (field === 'burst') {
    const instead = fallback.burst ? `LIMIT_BURST=${encodeBurst(fallback.burst)}` : 'no pacing';
    return {
      fields: { org, field, stored: value.slice(0, 80), applied: instead },
      msg:
        `the pacing burst stored in Redis for organization '${org}' is malformed (burst = '${value.slice(0, 80)}', ` +
        `expected N or P%): this worker ignores it and applies ${instead}; set it again with ` +
        `'learner-transfer limits set --org ${org} --burst 10%'`,
    };
  }
  const what =
    field === 'org'
      ? { name: 'limit of the organization', instead: `LIMIT_PER_ORG=${formatRate(fallback.limitPerOrg)}` }
      : field === 'token'
        ? {
            name: 'default limit per token',
            instead: `LIMIT_PER_TOKEN=${formatRate(fallback.limitPerToken)}`,
          }
        : { name: `limit of token ${tokenId ?? field}`, instead: 'the default limit per token' };
  const fix =
    field === 'org'
      ? `--per-org N/DURATION`
      : tokenId !== null
        ? `--token ${tokenId} --per-token N/DURATION`
        : `--per-token N/DURATION`;
  return {
    fields: { org, field, stored, applied: what.instead },
    msg:
      `the ${what.name} stored in Redis for organization '${org}' is malformed (${field} = '${stored}', ` +
      `expected max/windowMs with max 1..${RATE_MAX_COUNT} and windowMs 1..${RATE_MAX_WINDOW_MS}): ` +
      `this worker ignores it and applies ${what.instead}, and workers with other LIMIT_* apply theirs; ` +
      `set it again with 'learner-transfer limits set --org ${org} ${fix}' or 'limits reset --org ${org}'`,
  };
}

const SEED_VARIABLES = ['LIMIT_PER_TOKEN', 'LIMIT_PER_ORG'] as const;

/**
 * How LIMIT_* are recorded in `seededFrom`, with those the environment set (`set`) when known.
 */
export function seedRecord(limits: FallbackLimits): string {
  const set = limits.limitVariablesSet;
  return JSON.stringify({
    LIMIT_PER_TOKEN: formatRate(limits.limitPerToken),
    LIMIT_PER_ORG: formatRate(limits.limitPerOrg),
    ...(set ? { set: SEED_VARIABLES.filter((v) => set.includes(v)) } : {}),
  });
}

/**
 * Seeds the organization's limits from LIMIT_* when none are stored (HSETNX per field in one
 * MULTI: the first process wins). Returns the stored policy and whether this call wrote.
 */
export async function seedPolicy(
  redis: RedisClient,
  keys: Keys,
  org: string,
  limits: FallbackLimits,
): Promise<{ seeded: boolean; policy: LimitPolicy }> {
  const key = keys.policy(org);
  const multi = redis
    .multi()
    .hsetnx(key, 'org', encodeRate(limits.limitPerOrg))
    .hsetnx(key, 'token', encodeRate(limits.limitPerToken))
    .hsetnx(key, 'seededFrom', seedRecord(limits));
  // A policy of the previous release has no burst: it gets this process's.
  if (limits.burst) multi.hsetnx(key, 'burst', encodeBurst(limits.burst));
  const replies = await multi.hgetall(key).exec();
  if (!replies) throw new LearnerTransferError('LT_INTERNAL', 'limits: the seed transaction was aborted');
  for (const [err] of replies) if (err) throw err;
  const seeded = replies.slice(0, 2).some(([, v]) => Number(v) === 1);
  return { seeded, policy: parsePolicy(replies.at(-1)?.[1] as Record<string, string>) };
}

const sameRate = (a: Rate | null, b: Rate) => a !== null && a.max === b.max && a.windowMs === b.windowMs;

/**
 * The LIMIT_* set in the environment whose values differ from the stored limits, each with both
 * values; empty when they agree or nothing is stored (a built-in default is nobody's setting).
 */
export function envDifferences(
  policy: LimitPolicy,
  limits: FallbackLimits,
): Array<{ variable: LimitVariable; env: string; stored: string }> {
  const set = limits.limitVariablesSet;
  return allDifferences(policy, limits).filter((d) => !set || set.includes(d.variable));
}

function allDifferences(
  policy: LimitPolicy,
  limits: FallbackLimits,
): Array<{ variable: LimitVariable; env: string; stored: string }> {
  const out: ReturnType<typeof envDifferences> = [];
  if (policy.perToken && !sameRate(policy.perToken, limits.limitPerToken)) {
    out.push({
      variable: 'LIMIT_PER_TOKEN',
      env: formatRate(limits.limitPerToken),
      stored: formatRate(policy.perToken),
    });
  }
  if (policy.perOrg && !sameRate(policy.perOrg, limits.limitPerOrg)) {
    out.push({
      variable: 'LIMIT_PER_ORG',
      env: formatRate(limits.limitPerOrg),
      stored: formatRate(policy.perOrg),
    });
  }
  if (policy.burst && limits.burst && encodeBurst(policy.burst) !== encodeBurst(limits.burst)) {
    out.push({ variable: 'LIMIT_BURST', env: encodeBurst(limits.burst), stored: encodeBurst(policy.burst) });
  }
  return out;
}

/**
 * The warning when this process's LIMIT_* differ from the stored limits (null when they agree).
 */
export function envMismatchWarning(org: string, policy: LimitPolicy, limits: FallbackLimits): string | null {
  const diffs = envDifferences(policy, limits);
  if (diffs.length === 0) return null;
  const list = diffs.map((d) => `${d.variable}=${d.env} (stored: ${d.stored})`).join(', ');
  return (
    `${list} ${diffs.length === 1 ? 'differs' : 'differ'} from the limits stored in Redis for organization '${org}': this process follows Redis, ` +
    `as every worker does. Change them with 'learner-transfer limits set --org ${org} ...', or go back to ` +
    `this environment's LIMIT_* with 'learner-transfer limits reset --org ${org}'`
  );
}

function warnIfDifferent(
  org: string,
  policy: LimitPolicy,
  limits: FallbackLimits,
  logger: Logger,
  warned: Set<string>,
): void {
  const warning = envMismatchWarning(org, policy, limits);
  if (!warning || warned.has(org)) return;
  warned.add(org);
  const fields: Record<string, string> = { org };
  for (const d of envDifferences(policy, limits)) {
    fields[d.variable] = d.env;
    const suffix = { LIMIT_PER_TOKEN: 'PerToken', LIMIT_PER_ORG: 'PerOrg', LIMIT_BURST: 'Burst' }[d.variable];
    fields[`stored${suffix}`] = d.stored;
  }
  logger.warn(fields, warning);
}

/**
 * Warns, once per organization (`warned`), when this process's LIMIT_* differ from Redis's.
 * Read-only, run by every command at start; a failed read is one debug line.
 */
export async function warnIfLimitsDiffer(
  redis: RedisClient,
  keys: Keys,
  orgs: readonly string[],
  limits: FallbackLimits,
  logger: Logger,
  warned: Set<string> = new Set(),
): Promise<void> {
  // Every organization's policy in one pipeline per node, not one round trip each.
  let policies: LimitPolicy[];
  try {
    policies = await readBatched(
      redis,
      orgs.map((org) => ({
        slotKey: keys.policy(org),
        add: (pipe) => void pipe.hgetall(keys.policy(org)),
        read: (replies) => parsePolicy((replies[0] ?? {}) as Record<string, string>),
      })),
    );
  } catch (err) {
    logger.debug(
      { orgs: orgs.length, err: (err as Error).message },
      'could not read the limits stored in Redis',
    );
    return;
  }
  orgs.forEach((org, i) => warnIfDifferent(org, policies[i] as LimitPolicy, limits, logger, warned));
}

/**
 * Seeds an organization's policy the first time this process works for it, and warns once when
 * its LIMIT_* differ. A refused write is not fatal: acquire falls back to LIMIT_* until a seed
 * succeeds.
 */
export async function seedPolicies(
  redis: RedisClient,
  keys: Keys,
  orgs: readonly string[],
  limits: FallbackLimits,
  logger: Logger,
  warned: Set<string> = new Set(),
): Promise<void> {
  for (const org of orgs) {
    try {
      const { seeded, policy } = await seedPolicy(redis, keys, org, limits);
      if (seeded) logger.debug({ org, seededFrom: policy.seededFrom }, 'limits seeded in Redis from LIMIT_*');
      warnIfDifferent(org, policy, limits, logger, warned);
    } catch (err) {
      logger.warn(
        { org, err: (err as Error).message },
        'could not seed the limits in Redis: LIMIT_* apply until they are seeded',
      );
    }
  }
}

/**
 * Policies read at most every `maxAgeMs` per organization, for display and the 429 fallback
 * block (never acquire).
 */
export class PolicyCache {
  private readonly entries = new Map<string, { at: number; value: Promise<LimitPolicy> }>();

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly maxAgeMs = 2000,
  ) {}

  get(org: string): Promise<LimitPolicy> {
    const now = Date.now();
    const hit = this.entries.get(org);
    if (hit && now - hit.at < this.maxAgeMs) return hit.value;
    const value = readPolicy(this.redis, this.keys, org);
    this.entries.set(org, { at: now, value });
    // A failed read is not kept: the next call asks again.
    value.catch(() => {
      if (this.entries.get(org)?.value === value) this.entries.delete(org);
    });
    return value;
  }
}
