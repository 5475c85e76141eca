// The live controls of an organization's policy (limits set / reset, pause, resume), for the
// CLI and the dashboard: one atomic change-policy.lua each, announced on the events channel,
// then written to the change log.
import { appendChange } from './control-log.ts';
import { formatRate, rateInBounds, rateMessage } from '../core/duration.ts';
import { LearnerTransferError } from '../core/errors.ts';
import { isValidOrgKey, type Keys } from '../core/keys.ts';
import type { RedisClient } from '../redis/client.ts';
import { encodeRate, parsePolicy, seedRecord, type FallbackLimits, type LimitPolicy } from './policy.ts';
import { LIMITER_SCRIPTS } from './scripts.ts';
import type { BudgetEvent, PauseInfo } from './types.ts';
import { encodeBurst } from '../core/burst.ts';
import { changesAnything, flagList, LIMIT_KINDS, logKinds, resetRemoves, type LimitChange } from './kinds.ts';
import { encodeOpen, scheduleOf } from './run-window-open.ts';
import { HALT_AT_EXPECTED, HALT_SAMPLE_EXPECTED, parseHaltAt, parseHaltSample } from '../core/halt-rule.ts';
import { clearSample } from './breaker.ts';

const TOKEN_ID_RE = /^[A-Za-z0-9_.-]{1,64}$/;

export { parseReserve, type LimitChange } from './kinds.ts';

export interface PolicyChangeResult {
  before: LimitPolicy;
  after: LimitPolicy;
  /** Stream id of the change log entry; null when nothing changed (nothing is logged then). */
  changeId: string | null;
}

interface ScriptChange {
  set?: Record<string, string>;
  setnx?: Record<string, string>;
  del?: string[];
  delPrefix?: string | string[];
  share?: number | null;
  fallbackOrg?: string;
}

function invalid(message: string): LearnerTransferError {
  return new LearnerTransferError('LT_USAGE', message);
}

function check(org: string, tokenId?: string | null): void {
  if (!isValidOrgKey(org)) throw invalid(`--org expects an organization key (letters, digits, _ or -)`);
  if (tokenId != null && !TOKEN_ID_RE.test(tokenId)) {
    throw invalid('--token expects a token id (a fingerprint, as `learner-transfer tokens list` shows it)');
  }
}

function flatToHash(flat: unknown): Record<string, string> {
  const list = Array.isArray(flat)
    ? flat.map((v) => (Buffer.isBuffer(v) ? v.toString('utf8') : String(v)))
    : [];
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < list.length; i += 2) out[list[i] as string] = list[i + 1] as string;
  return out;
}

/** What the change log keeps of a policy's limits: readable values, never a secret. */
export function describeLimits(p: LimitPolicy): Record<string, unknown> {
  return {
    ...logKinds(p),
    // Learned limits only when there are some (a reset forgets them, and says so in the change log).
    ...(Object.keys(p.learned.tokens).length > 0 || p.learned.org
      ? {
          learned: {
            ...(p.learned.org ? { org: p.learned.org.max } : {}),
            ...Object.fromEntries(
              Object.entries(p.learned.tokens)
                .sort(([a], [b]) => a.localeCompare(b))
                .map(([id, l]) => [id, l.max]),
            ),
          },
        }
      : {}),
  };
}

const changed = (d: { before: unknown; after: unknown }) =>
  JSON.stringify(d.before) !== JSON.stringify(d.after);

function describePause(p: LimitPolicy, tokenId: string | null): PauseInfo | null {
  return tokenId === null ? p.paused : (p.pausedTokens[tokenId] ?? null);
}

async function apply(
  redis: RedisClient,
  keys: Keys,
  org: string,
  tokenId: string | null,
  action: string,
  change: ScriptChange,
): Promise<{ before: LimitPolicy; after: LimitPolicy }> {
  const event: BudgetEvent = { event: 'policy', org, tokenId, change: action };
  const reply = await LIMITER_SCRIPTS.run(
    redis,
    'change-policy',
    [keys.policy(org)],
    [JSON.stringify(change), keys.limiterEvents(org), JSON.stringify(event)],
  );
  const [before, after] = Array.isArray(reply) ? reply : [];
  return { before: parsePolicy(flatToHash(before)), after: parsePolicy(flatToHash(after)) };
}

/** Throws (LT_USAGE, naming the flag) when a `limits set` makes no sense, before any write. */
export function checkLimitChange(org: string, change: LimitChange): void {
  check(org, change.tokenId);
  if (change.tokenId !== undefined && change.perToken === undefined) {
    throw invalid('--token needs --per-token N/DURATION (the limit of that one token)');
  }
  if (!changesAnything(change)) throw invalid(`limits set needs at least one of ${flagList()}`);
  // Built in code (the dashboard, tests) or parsed: held to the one rule of core/halt-rule.ts.
  if (change.haltAt !== undefined && parseHaltAt(String(change.haltAt)) === undefined) {
    throw invalid(`--halt-at expects ${HALT_AT_EXPECTED}, got '${String(change.haltAt)}'`);
  }
  if (change.haltSample !== undefined && parseHaltSample(String(change.haltSample)) === undefined) {
    throw invalid(`--halt-sample expects ${HALT_SAMPLE_EXPECTED}, got '${String(change.haltSample)}'`);
  }
  // Rates built in code are held to readRate's bounds, or every worker would ignore them
  // (includes/policy.lua).
  for (const [flag, rate] of [
    ['--per-org', change.perOrg],
    ['--per-token', change.perToken],
  ] as const) {
    if (rate && !rateInBounds(rate)) throw invalid(rateMessage(flag, formatRate(rate), 'out of bounds'));
  }
  if (change.reserve && 'count' in change.reserve && !Number.isSafeInteger(change.reserve.count)) {
    throw invalid('--reserve expects a whole number of permits or a share like 20%');
  }
}

/** `limits set`: changes the limits given, leaves the others. */
export async function setLimits(
  redis: RedisClient,
  keys: Keys,
  org: string,
  change: LimitChange,
  fallback: FallbackLimits,
  who: string,
): Promise<PolicyChangeResult> {
  checkLimitChange(org, change);
  const set: Record<string, string> = {};
  const del: string[] = [];
  let share: number | null = null;
  for (const kind of LIMIT_KINDS) kind.store?.(change, set, del);
  // A reserve given as a share is resolved against the organization's limit in the same step.
  if (change.reserve && 'share' in change.reserve) share = change.reserve.share;
  if (change.runWindow) {
    // The calendar given over the one stored, turned into acquire.lua's instants in the same
    // step.
    const stored = parsePolicy(await redis.hgetall(keys.policy(org))).runWindow;
    const texts = {
      windows: change.runWindow.windows ?? stored?.windows ?? '',
      tz: change.runWindow.tz ?? stored?.tz ?? '',
      blackout: change.runWindow.blackout ?? stored?.blackout ?? '',
    };
    const schedule = scheduleOf(texts);
    if (schedule) {
      for (const [field, value] of [
        ['runWindow', texts.windows],
        ['tz', texts.tz],
        ['blackout', texts.blackout],
      ] as const) {
        if (value === '') del.push(field);
        else set[field] = value;
      }
      // As of Redis's clock, the one acquire.lua reads the instants with (not this host's).
      const [sec, micros] = await redis.time();
      set.open = encodeOpen(schedule, Number(sec) * 1000 + Math.floor(Number(micros) / 1000));
    } else if (change.runWindow.windows === undefined && change.runWindow.blackout === undefined) {
      throw invalid('--tz needs a run window: give --run-window or --blackout too');
    } else {
      // The last blackout removed with no window: no calendar left, transfers may run at any hour.
      del.push('runWindow', 'tz', 'blackout', 'open');
    }
  }
  const { before, after } = await apply(redis, keys, org, change.tokenId ?? null, 'limits.set', {
    set,
    del,
    share,
    fallbackOrg: encodeRate(fallback.limitPerOrg),
  });
  const details = { before: describeLimits(before), after: describeLimits(after) };
  const changeId = changed(details)
    ? await appendChange(redis, keys, {
        who,
        action: 'limits.set',
        org,
        tokenId: change.tokenId ?? null,
        details,
      })
    : null;
  return { before, after, changeId };
}

/**
 * `limits reset`: back to this process's LIMIT_*, with no token limits, reserve or learned
 * limits (the 429 counts stay: history).
 */
export async function resetLimits(
  redis: RedisClient,
  keys: Keys,
  org: string,
  limits: FallbackLimits,
  who: string,
): Promise<PolicyChangeResult> {
  check(org);
  const { before, after } = await apply(redis, keys, org, null, 'limits.reset', {
    delPrefix: ['tok:', 'learned:', 'refuted:'],
    del: [...resetRemoves(), ...(limits.burst ? [] : ['burst'])],
    set: {
      org: encodeRate(limits.limitPerOrg),
      token: encodeRate(limits.limitPerToken),
      seededFrom: seedRecord(limits),
      ...(limits.burst ? { burst: encodeBurst(limits.burst) } : {}),
    },
  });
  const details = { before: describeLimits(before), after: describeLimits(after) };
  const changeId = changed(details)
    ? await appendChange(redis, keys, { who, action: 'limits.reset', org, tokenId: null, details })
    : null;
  return { before, after, changeId };
}

/**
 * `limits reset --run-window`: transfers may run at any hour again (a plain reset keeps the
 * window).
 */
export async function resetRunWindow(
  redis: RedisClient,
  keys: Keys,
  org: string,
  who: string,
): Promise<PolicyChangeResult> {
  check(org);
  const { before, after } = await apply(redis, keys, org, null, 'limits.reset', {
    del: ['runWindow', 'tz', 'blackout', 'open'],
  });
  const details = { before: describeLimits(before), after: describeLimits(after) };
  const changeId = changed(details)
    ? await appendChange(redis, keys, { who, action: 'limits.reset', org, tokenId: null, details })
    : null;
  return { before, after, changeId };
}

/** `pause` (paused = true) and `resume`: the organization, or one token of it. */
export async function setPaused(
  redis: RedisClient,
  keys: Keys,
  org: string,
  tokenId: string | null,
  paused: boolean,
  who: string,
): Promise<PolicyChangeResult> {
  check(org, tokenId);
  const field = tokenId === null ? 'paused' : `paused:${tokenId}`;
  const info: PauseInfo = { who, at: new Date().toISOString() };
  const action = paused ? 'pause' : 'resume';
  const { before, after } = await apply(
    redis,
    keys,
    org,
    tokenId,
    action,
    paused ? { setnx: { [field]: JSON.stringify(info) } } : { del: [field] },
  );
  // A resume starts the error budget afresh, or the outcomes that halted it would halt it
  // again.
  if (!paused) await clearSample(redis, keys, org, tokenId);
  const details = {
    before: { paused: describePause(before, tokenId) },
    after: { paused: describePause(after, tokenId) },
  };
  const changeId = changed(details)
    ? await appendChange(redis, keys, { who, action, org, tokenId, details })
    : null;
  return { before, after, changeId };
}
