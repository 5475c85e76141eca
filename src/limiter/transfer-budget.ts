// The transfer budget (decision 1): exact sliding-window logs per token and per organization in
// Redis, under the organization's live policy (policy.ts). The exactness argument is
// acquire.lua's header; this class checks inputs, builds keys and reads the scripts' replies.
import { judgeOutcome, type JudgeInput, type JudgeResult } from './breaker.ts';
import { DEFAULT_HALT_AT, DEFAULT_HALT_SAMPLE } from '../core/halt-rule.ts';
import { randomBytes } from 'node:crypto';
import type { Rate } from '../core/duration.ts';
import { LearnerTransferError } from '../core/errors.ts';
import { createKeys, isValidOrgKey, type Keys } from '../core/keys.ts';
import { LIMITER_SCRIPTS } from './scripts.ts';
import { parseFrees, type BudgetFrees } from './budget-schedule.ts';
import { encodeBurst } from '../core/burst.ts';
import { refreshOpen } from './run-window-open.ts';
import { REFUSAL_SCOPE_NAMES } from './kinds.ts';
import type { RedisClient } from '../redis/client.ts';
import { readBatched } from '../redis/batch.ts';
import {
  effectiveLimits,
  parsePause,
  PolicyCache,
  readPolicy,
  type EffectiveLimits,
  type LimitPolicy,
} from './policy.ts';
import type {
  Acquired,
  BudgetEvent,
  BudgetOptions,
  BudgetView,
  LearnResult,
  LeaseRequest,
  RefusalScope,
  Refused,
  ScopeView,
  TokenView,
} from './types.ts';

/** Token ids are fingerprints (config.ts tokenFingerprint): short, safe inside a key. */
const TOKEN_ID_RE = /^[A-Za-z0-9_.-]{1,64}$/;
const REASON_RE = /^[\x20-\x7e]{1,64}$/;
/** Keys outlive their last write by window + in-flight TTL + this slack (as in acquire.lua). */
const KEY_SLACK_MS = 1000;

function invalid(message: string): LearnerTransferError {
  return new LearnerTransferError('LT_INPUT_INVALID', `limiter: ${message}`);
}

function checkRate(name: string, rate: Rate): void {
  if (
    !Number.isSafeInteger(rate.max) ||
    rate.max < 1 ||
    !Number.isSafeInteger(rate.windowMs) ||
    rate.windowMs < 1
  ) {
    throw invalid(`${name}: expected whole max >= 1 and windowMs >= 1, got ${JSON.stringify(rate)}`);
  }
}

function checkOrg(org: string): void {
  // The org is the {hash tag}: a '}' or ':' in it would break the slot or the key layout.
  if (!isValidOrgKey(org))
    throw invalid(`org key must be 1-64 letters, digits, _ or -, got '${org.slice(0, 64)}'`);
}

function checkTokenId(tokenId: string): void {
  // Never echo it: a caller passing a secret by mistake must not see it in a log line.
  if (!TOKEN_ID_RE.test(tokenId))
    throw invalid('token id must be a fingerprint (1-64 letters, digits, _ . or -)');
}

function num(value: unknown): number {
  const n = typeof value === 'number' ? value : Number(value);
  if (!Number.isFinite(n))
    throw new LearnerTransferError('LT_INTERNAL', `limiter: unexpected script reply ${String(value)}`);
  return n;
}

function text(value: unknown): string {
  return Buffer.isBuffer(value) ? value.toString('utf8') : String(value);
}

function list(value: unknown): unknown[] {
  if (!Array.isArray(value))
    throw new LearnerTransferError('LT_INTERNAL', 'limiter: unexpected script reply (not an array)');
  return value;
}

/** The run window's stored texts and instants from peek's tail; nothing when none is set. */
function runWindowOf(tail: unknown[]): Pick<BudgetView, 'runWindow'> {
  const [windows = '', tz = '', blackout = '', open = ''] = tail.map((v) => (v === undefined ? '' : text(v)));
  return windows || blackout ? { runWindow: { windows, tz, blackout, open } } : {};
}

/** Suggested in-flight TTL: the request timeout plus as much again (at least 1 s). */
export function inflightTtlFor(requestTimeoutMs: number): number {
  return requestTimeoutMs + Math.max(1000, requestTimeoutMs);
}

export class TransferBudget {
  readonly keys: Keys;
  /** The fallback limits (LIMIT_*) and the in-flight TTL; the limits in effect are the policy's. */
  readonly options: Readonly<BudgetOptions>;
  /** The longest key TTLs any acquire of this process computed (never less than the fallback's). */
  private tokenKeyTtlMs: number;
  private orgKeyTtlMs: number;
  private readonly policies: PolicyCache;
  /** Organizations this budget has seeded (or is seeding): see BudgetOptions.seed. */
  private readonly seeded = new Map<string, Promise<void>>();

  constructor(
    private readonly redis: RedisClient,
    options: BudgetOptions,
  ) {
    checkRate('limitPerToken', options.limitPerToken);
    checkRate('limitPerOrg', options.limitPerOrg);
    if (!Number.isSafeInteger(options.inflightTtlMs) || options.inflightTtlMs < 1) {
      throw invalid(`inflightTtlMs: expected a whole number of ms >= 1, got ${options.inflightTtlMs}`);
    }
    this.options = Object.freeze({ ...options });
    this.keys = createKeys(options.prefix);
    LIMITER_SCRIPTS.define(redis);
    this.tokenKeyTtlMs = options.limitPerToken.windowMs + options.inflightTtlMs + KEY_SLACK_MS;
    this.orgKeyTtlMs = options.limitPerOrg.windowMs + options.inflightTtlMs + KEY_SLACK_MS;
    this.policies = new PolicyCache(redis, this.keys);
  }

  /**
   * Key TTLs of the logs, for a script that settles a permit elsewhere (finish-attempt): the
   * longest any acquire here computed, at least the fallback's. Scripts only extend a TTL.
   */
  get keyTtls(): { tokenMs: number; orgMs: number } {
    return { tokenMs: this.tokenKeyTtlMs, orgMs: this.orgKeyTtlMs };
  }

  /**
   * The error budget (breaker.ts): one answer judged in the org's and token's samples, in one
   * step.
   */
  judge(input: JudgeInput): Promise<JudgeResult> {
    checkOrg(input.org);
    const defaults = this.options.halt ?? { haltAt: DEFAULT_HALT_AT, haltSample: DEFAULT_HALT_SAMPLE };
    return judgeOutcome(this.redis, this.keys, defaults, input);
  }

  /** The organization's policy as stored in Redis now (exact: one read). */
  policy(org: string): Promise<LimitPolicy> {
    checkOrg(org);
    return readPolicy(this.redis, this.keys, org);
  }

  /**
   * The limits in effect for an organization, read at most every 2 s (display, the 429 fallback
   * block; never acquire).
   */
  async limits(org: string): Promise<EffectiveLimits> {
    checkOrg(org);
    return effectiveLimits(await this.policies.get(org), this.options);
  }

  /**
   * One permit for one request of `org`, on the token of `tokenIds` with the most room, and
   * `lease` the learner's lease in the same step. Call it right before sending; refused, sleep
   * `waitMs`.
   */
  async acquire(org: string, tokenIds: readonly string[], lease?: LeaseRequest): Promise<Acquired | Refused> {
    const pool = this.pool(org, tokenIds);
    const { seed } = this.options;
    if (seed) {
      let seeding = this.seeded.get(org);
      if (!seeding) {
        // A seed that rejects is tried again by the next acquire.
        seeding = seed(org).catch((err: unknown) => {
          this.seeded.delete(org);
          throw err;
        });
        this.seeded.set(org, seeding);
      }
      await seeding;
    }
    if (lease && (!Number.isSafeInteger(lease.learnerId) || /\s/.test(lease.holder) || !lease.holder)) {
      throw invalid('lease: expected a learner id and a holder without spaces');
    }
    const first = await this.acquireOnce(org, pool, lease);
    if (!('stale' in first)) return first;
    // Stale run-window instants: written again from the calendar as of Redis's clock, then
    // asked again (a second 'stale' is an error, never a loop).
    const unreadable = await refreshOpen(this.redis, this.keys, org, first.stale);
    if (unreadable) this.options.onMalformedPolicy?.(org, [{ field: 'runWindow', value: unreadable }]);
    const second = await this.acquireOnce(org, pool, lease);
    if ('stale' in second)
      throw new LearnerTransferError(
        'LT_INTERNAL',
        `limiter: the run window of '${org}' stays stale after a refresh (is the Redis clock far from this host's?)`,
      );
    return second;
  }

  private async acquireOnce(
    org: string,
    pool: string[],
    lease: LeaseRequest | undefined,
  ): Promise<Acquired | Refused | { stale: number }> {
    const { limitPerToken: tok, limitPerOrg: perOrg, inflightTtlMs } = this.options;
    const keys = this.scriptKeys(org, pool);
    keys.splice(3, 0, this.keys.lease(org), lease?.lockKey || this.keys.lease(org));
    keys.push(this.keys.policy(org), this.keys.pace(org), this.keys.breaker(org));
    const reply = list(
      await LIMITER_SCRIPTS.run(this.redis, 'acquire', keys, [
        tok.max,
        tok.windowMs,
        perOrg.max,
        perOrg.windowMs,
        inflightTtlMs,
        randomBytes(6).toString('hex'),
        lease ? String(lease.learnerId) : '',
        lease?.holder ?? '',
        lease?.lockKey ? lease.lockToken : '',
        lease?.graceMs ?? 0,
        this.burstArg(),
        ...pool,
      ]),
    );
    const granted = num(reply[0]) === 1;
    // The last element (acquire.lua): the stored rate fields it ignored as malformed.
    const malformed = reply[granted ? 8 : 5];
    if (Array.isArray(malformed) && malformed.length > 0) this.reportMalformed(org, malformed);
    if (granted) {
      const tokenId = pool[num(reply[2]) - 1];
      if (tokenId === undefined)
        throw new LearnerTransferError('LT_INTERNAL', 'limiter: acquire granted a token outside the pool');
      const keyTtls = { tokenMs: num(reply[5]), orgMs: num(reply[6]) };
      // Settles of this process keep every log at least as long as the windows in effect need.
      this.tokenKeyTtlMs = Math.max(this.tokenKeyTtlMs, keyTtls.tokenMs);
      this.orgKeyTtlMs = Math.max(this.orgKeyTtlMs, keyTtls.orgMs);
      return {
        ok: true,
        permitId: text(reply[1]),
        tokenId,
        now: num(reply[3]),
        tookOver: reply[4] !== undefined && num(reply[4]) === 1,
        keyTtls,
        ...(num(reply[7]) === 1 ? { probe: true } : {}),
      };
    }
    const scope = text(reply[2]) as RefusalScope;
    // Stale run-window instants: the caller refreshes them as of this Redis time.
    if ((scope as string) === 'run-window-stale') return { stale: num(reply[4]) };
    if (!REFUSAL_SCOPE_NAMES.includes(scope))
      throw new LearnerTransferError('LT_INTERNAL', `limiter: unexpected refusal scope '${scope}'`);
    return {
      ok: false,
      waitMs: Math.max(1, num(reply[1])),
      scope,
      allBlockedIndefinitely: num(reply[3]) === 1,
      now: num(reply[4]),
    };
  }

  /**
   * The request got a response, whatever it is: the permit is stamped now and frees one window
   * later.
   */
  async settle(org: string, tokenId: string, permitId: string): Promise<void> {
    await this.finish(org, tokenId, permitId, 'response');
  }

  /**
   * The request may have reached the server but no response will come: the permit is stamped
   * with its in-flight deadline (or now, if later), as if it expired, but at once.
   */
  async abandon(org: string, tokenId: string, permitId: string): Promise<void> {
    await this.finish(org, tokenId, permitId, 'abandon');
  }

  /**
   * The request provably never reached the server: the budget is returned at once. Only when
   * sure: when in doubt, abandon.
   */
  async release(org: string, tokenId: string, permitId: string): Promise<void> {
    checkOrg(org);
    checkTokenId(tokenId);
    const event: BudgetEvent = { event: 'release', org, tokenId };
    await LIMITER_SCRIPTS.run(
      this.redis,
      'release',
      [this.keys.tokenInflight(org, tokenId), this.keys.orgInflight(org)],
      [permitId, this.keys.limiterEvents(org), JSON.stringify(event)],
    );
  }

  /**
   * Blocks one token (or, with null, the organization) for `durationMs` after a 429, or
   * 'indefinite' after a 401 until unblock(). A longer block in place is kept. `reason` is
   * never a secret.
   */
  async block(
    org: string,
    tokenId: string | null,
    durationMs: number | 'indefinite',
    reason: string,
  ): Promise<void> {
    checkOrg(org);
    if (tokenId !== null) checkTokenId(tokenId);
    if (!REASON_RE.test(reason)) throw invalid('block reason must be 1-64 printable ASCII characters');
    let duration: string | number = 'indefinite';
    if (durationMs !== 'indefinite') {
      if (!Number.isFinite(durationMs) || durationMs <= 0) {
        throw invalid(`block duration must be > 0 ms or 'indefinite', got ${durationMs}`);
      }
      duration = Math.ceil(durationMs);
    }
    const key = tokenId === null ? this.keys.orgBlock(org) : this.keys.tokenBlock(org, tokenId);
    await LIMITER_SCRIPTS.run(this.redis, 'block', [key], [reason, duration]);
  }

  /**
   * The service answered 429 to `permitId` on `tokenId` (after the settle): learn.lua stores
   * what the service had accepted in its window, when below the limit in force, as the learned
   * limit, and counts the 429. `poolSize`: the caller's tokens for the org (one: it stands for
   * the org). Idempotent per permit.
   */
  async learn(org: string, tokenId: string, permitId: string, poolSize: number): Promise<LearnResult> {
    checkOrg(org);
    checkTokenId(tokenId);
    if (!/^\d+(\.\d+)?-[0-9a-z]+$/i.test(permitId)) throw invalid('learn: not a permit id');
    const { limitPerToken: tok, limitPerOrg: perOrg } = this.options;
    const k = this.keys;
    const reply = list(
      await LIMITER_SCRIPTS.run(
        this.redis,
        'learn',
        [
          k.tokenLog(org, tokenId),
          k.tokenInflight(org, tokenId),
          k.tokenRefused(org, tokenId),
          k.orgLog(org),
          k.orgInflight(org),
          k.orgRefused(org),
          k.policy(org),
        ],
        [
          tok.max,
          tok.windowMs,
          perOrg.max,
          perOrg.windowMs,
          tokenId,
          permitId,
          Math.max(1, Math.floor(poolSize)),
        ],
      ),
    );
    const learnedOrNull = (v: unknown) => (num(v) > 0 ? num(v) : null);
    const cause = text(reply[7]);
    if (cause !== 'token' && cause !== 'org' && cause !== 'repeat') {
      throw new LearnerTransferError('LT_INTERNAL', `limiter: unexpected learn cause '${cause}'`);
    }
    return {
      rateLimited: num(reply[0]),
      cause,
      token: { accepted: num(reply[1]), limit: num(reply[2]), learned: learnedOrNull(reply[3]) },
      org: {
        accepted: num(reply[4]) < 0 ? null : num(reply[4]),
        limit: num(reply[5]),
        learned: learnedOrNull(reply[6]),
      },
    };
  }

  async unblock(org: string, tokenId: string | null): Promise<void> {
    checkOrg(org);
    if (tokenId !== null) checkTokenId(tokenId);
    const key = tokenId === null ? this.keys.orgBlock(org) : this.keys.tokenBlock(org, tokenId);
    const event: BudgetEvent = { event: 'unblock', org, tokenId };
    await this.redis.multi().del(key).publish(this.keys.limiterEvents(org), JSON.stringify(event)).exec();
  }

  /** The budget as acquire would see it now, read-only (no-writes). */
  async peek(org: string, tokenIds: readonly string[]): Promise<BudgetView> {
    const call = this.peekCall(org, tokenIds);
    return this.peekView(await LIMITER_SCRIPTS.run(this.redis, 'peek', call.keys, call.args), call.pool);
  }

  /** peek() with when its counted permits leave their windows (BudgetView.frees, for the ETA). */
  async peekWithFrees(org: string, tokenIds: readonly string[], freeSteps: number): Promise<BudgetView> {
    const view = await this.peek(org, tokenIds);
    const [frees] = await this.peekFreesMany([{ org, tokenIds, view }], freeSteps);
    return { ...view, frees };
  }

  /** peek() of many organizations, one pipeline per Redis node (redis/batch.ts). */
  async peekMany(scopes: readonly { org: string; tokenIds: readonly string[] }[]): Promise<BudgetView[]> {
    const calls = scopes.map(({ org, tokenIds }) => ({ org, ...this.peekCall(org, tokenIds) }));
    // A pipeline takes the commands its client had when it was made.
    LIMITER_SCRIPTS.define(this.redis);
    return readBatched(
      this.redis,
      calls.map((call) => ({
        slotKey: this.keys.policy(call.org),
        add: (pipe) => void LIMITER_SCRIPTS.queue(pipe, 'peek', call.keys, call.args),
        read: (replies) => this.peekView(replies[0], call.pool),
      })),
    );
  }

  /**
   * When the permits counted in each organization's windows leave them, read with the windows a
   * peek gave (`view`): for the organizations status must simulate. One pipeline per node.
   */
  async peekFreesMany(
    scopes: readonly { org: string; tokenIds: readonly string[]; view: BudgetView }[],
    freeSteps: number,
  ): Promise<(BudgetFrees | undefined)[]> {
    const calls = scopes.map(({ org, tokenIds, view }) => {
      const pool = this.pool(org, tokenIds);
      const k = this.keys;
      const keys = [k.orgLog(org), k.orgInflight(org)];
      for (const t of pool) keys.push(k.tokenLog(org, t), k.tokenInflight(org, t));
      const windows = pool.map((_, i) => view.tokens[i]?.windowMs ?? this.options.limitPerToken.windowMs);
      return { org, pool, keys, args: [freeSteps, view.org.windowMs, ...windows] };
    });
    LIMITER_SCRIPTS.define(this.redis);
    return readBatched(
      this.redis,
      calls.map((call) => ({
        slotKey: this.keys.policy(call.org),
        add: (pipe) => void LIMITER_SCRIPTS.queue(pipe, 'peek-frees', call.keys, call.args),
        read: (replies) => parseFrees(replies[0], call.pool.length),
      })),
    );
  }

  private peekCall(
    org: string,
    tokenIds: readonly string[],
  ): { pool: string[]; keys: string[]; args: (string | number)[] } {
    const pool = this.pool(org, tokenIds);
    const { limitPerToken: tok, limitPerOrg: perOrg } = this.options;
    return {
      pool,
      keys: [...this.scriptKeys(org, pool), this.keys.policy(org), this.keys.pace(org)],
      args: [tok.max, tok.windowMs, perOrg.max, perOrg.windowMs, this.burstArg(), ...pool],
    };
  }

  /** The fallback burst as the scripts read it ('' = no pacing unless the policy sets one). */
  private burstArg(): string {
    return this.options.burst ? encodeBurst(this.options.burst) : '';
  }

  private peekView(raw: unknown, pool: readonly string[]): BudgetView {
    const reply = list(raw);
    const scope = (raw: unknown): ScopeView & { override: boolean; rateLimited?: number } => {
      const v = list(raw);
      const used = num(v[0]);
      const inflight = num(v[1]);
      const ttl = num(v[4]);
      const limit = num(v[5]);
      const learnedMax = num(v[10] ?? -1);
      const count429 = num(v[13] ?? -1);
      const burst = num(v[14] ?? -1);
      return {
        used,
        inflight,
        remaining: Math.max(0, limit - used - inflight),
        limit,
        windowMs: num(v[6]),
        nextFreeInMs: num(v[2]),
        blocked: ttl === -2 ? null : { reason: text(v[3]), remainingMs: ttl === -1 ? null : ttl },
        paused: parsePause(text(v[7])),
        override: num(v[8]) === 1,
        // Only when there is something to say: a view with nothing learned has the shape it always had.
        ...(learnedMax >= 0
          ? {
              learned: {
                max: learnedMax,
                at: num(v[11]),
                configured: num(v[9]),
                nextProbeInMs: Math.max(0, num(v[12])),
              },
            }
          : {}),
        ...(count429 >= 0 ? { rateLimited: count429 } : {}),
        ...(burst > 0
          ? {
              pace: {
                burst,
                available: num(v[15]),
                nextInMs: num(v[16]),
                intervalMs: num(v[6]) / limit,
                tatInMs: num(text(v[17])),
              },
            }
          : {}),
      };
    };
    const tokens: TokenView[] = pool.map((tokenId, i) => ({ tokenId, ...scope(reply[i + 2]) }));
    const { override: _reserved, rateLimited: _none, ...orgView } = scope(reply[1]);
    return {
      now: num(reply[0]),
      org: orgView,
      tokens,
      policyStored: num(reply[pool.length + 2]) === 1,
      reserve: num(reply[pool.length + 3]),
      ...runWindowOf(reply.slice(pool.length + 4)),
    };
  }

  private reportMalformed(org: string, flat: unknown[]): void {
    const fields: Array<{ field: string; value: string }> = [];
    for (let i = 0; i + 1 < flat.length; i += 2)
      fields.push({ field: text(flat[i]), value: text(flat[i + 1]) });
    this.options.onMalformedPolicy?.(org, fields);
  }

  private async finish(
    org: string,
    tokenId: string,
    permitId: string,
    mode: 'response' | 'abandon',
  ): Promise<void> {
    checkOrg(org);
    checkTokenId(tokenId);
    await LIMITER_SCRIPTS.run(
      this.redis,
      'settle',
      [
        this.keys.tokenLog(org, tokenId),
        this.keys.tokenInflight(org, tokenId),
        this.keys.orgLog(org),
        this.keys.orgInflight(org),
      ],
      [permitId, mode, this.tokenKeyTtlMs, this.orgKeyTtlMs],
    );
  }

  /** The pool without repeats, in the caller's order (the order breaks ties between tokens). */
  private pool(org: string, tokenIds: readonly string[]): string[] {
    checkOrg(org);
    const pool = [...new Set(tokenIds)];
    pool.forEach(checkTokenId);
    return pool;
  }

  private scriptKeys(org: string, pool: readonly string[]): string[] {
    const k = this.keys;
    const keys = [k.orgLog(org), k.orgInflight(org), k.orgBlock(org)];
    for (const t of pool) keys.push(k.tokenLog(org, t), k.tokenInflight(org, t), k.tokenBlock(org, t));
    return keys;
  }
}
