// The error budget that halts an organization (docs/guard-rails.md): one fleet-wide sample per
// organization and per token, fed on the outcome path; judge-outcome.lua writes the pause when
// a rule is met. A halt IS a pause: `resume` lifts it.
import { HALT_STORM_MIN_PROBES, type HaltAt } from '../core/halt-rule.ts';
import type { Keys } from '../core/keys.ts';
import type { RedisClient } from '../redis/client.ts';
import { appendChange } from './control-log.ts';
import { LIMITER_SCRIPTS } from './scripts.ts';
import type { BudgetEvent } from './types.ts';

/** The author of a halt, in the pause and in the change log. */
export const BREAKER = 'breaker';

/**
 * How one answer feeds the sample: a success, a failure that will repeat, a not-found (its own
 * rule, 90%), a failure that halts at once, or nothing (only the 5xx storm hears it).
 */
export type SampleKind = 'success' | 'failure' | 'stale' | 'at-once' | null;

const KIND_LETTER: Record<Exclude<SampleKind, null>, string> = {
  success: 's',
  failure: 'f',
  stale: 'n',
  'at-once': 'h',
};

/** How a reason names each failure ("18 of the last 20 calls answered 403 forbidden"). */
const WORDS: Record<string, string> = {
  forbidden: '403 forbidden',
  'invalid-request': '400 invalid request',
  'not-found': '404 not found',
  'server-error': 'a server error (5xx) after every attempt',
  'bad-response': 'an unreadable 200 after every attempt',
  'unexpected-result': "a 200 that was not this learner's completed transfer (unexpected-result)",
};
const WORDS_JSON = JSON.stringify(WORDS);

export interface JudgeInput {
  org: string;
  tokenId: string;
  kind: SampleKind;
  code: string;
  /** The answer for the 5xx storm: a server error (any attempt), a success, or another answer. */
  storm: 'server-error' | 'success' | 'other' | null;
  /** The probe this call held during a storm, freed now. */
  probeHolder?: string | undefined;
  /** After a probe answered with a server error, the next one waits this long (ms). */
  probeGapMs?: number;
}

export interface JudgeResult {
  /** 'org': this step halted the organization; 'token': it paused the token; null: neither. */
  halted: 'org' | 'token' | null;
  reason: string;
  /** The 5xx storm flag after this step. */
  storm: boolean;
}

export interface BreakerDefaults {
  haltAt: HaltAt;
  haltSample: number;
  /** HALT_STORM (ms): a 5xx storm this long, with its probes, halts; 0 never; absent: 30 min. */
  haltStormMs?: number;
}

/** The default of haltStormMs (30m), for a budget made without the config. */
const DEFAULT_HALT_STORM_MS = 30 * 60_000;

/** The words that begin the reason of a halt by an endless 5xx storm (judge-outcome.lua). */
const STORM_REASON = 'a 5xx storm that does not end';

/** A halt by a storm: the service's to fix; any other, ours to check. */
function isStormHalt(reason: string): boolean {
  return reason.startsWith(STORM_REASON);
}

/** The halt's words as an operator reads them: the reason, then what to do. */
export function haltAdvice(org: string, reason: string, tokenId: string | null): string {
  if (tokenId !== null) {
    return (
      `token ${tokenId} of '${org}' was paused by the error budget: ${reason}. The other tokens go on. ` +
      `Check the token's permission, then 'learner-transfer resume --org ${org} --token ${tokenId}'.`
    );
  }
  return (
    `organization '${org}' was halted by the error budget: ${reason}. No new transfer is sent; waiting ` +
    `learners keep their attempts. ${checkAdvice(reason)}, then 'learner-transfer resume --org ${org}'.`
  );
}

/**
 * What to check before a resume: the service for a storm, else the token, the ids, the address.
 */
export function checkAdvice(reason: string): string {
  return isStormHalt(reason)
    ? `Check that the service answers again (its status, its operators)`
    : `Check the token, the CSV's id column and the base address ('learner-transfer plan --check')`;
}

/** Pushes one answer into the samples and judges them, in one step; logs a halt in `changes`. */
export async function judgeOutcome(
  redis: RedisClient,
  keys: Keys,
  defaults: BreakerDefaults,
  input: JudgeInput,
): Promise<JudgeResult> {
  const { org, tokenId, kind } = input;
  const event: BudgetEvent = { event: 'policy', org, tokenId: null, change: 'pause' };
  const at = new Date();
  const storm =
    input.storm === 'server-error' ? '5' : input.storm === 'success' ? 'ok' : input.storm ? '.' : '';
  const reply = await LIMITER_SCRIPTS.run(
    redis,
    'judge-outcome',
    [keys.policy(org), keys.breaker(org)],
    [
      kind ? KIND_LETTER[kind] : '',
      input.code,
      tokenId,
      defaults.haltAt === 'off' ? 'off' : String(defaults.haltAt),
      String(defaults.haltSample),
      WORDS_JSON,
      at.toISOString(),
      keys.limiterEvents(org),
      JSON.stringify(event),
      storm,
      input.probeHolder ?? '',
      String(at.getTime()),
      String(Math.max(0, Math.floor(input.probeGapMs ?? 0))),
      String(Math.max(0, Math.floor(defaults.haltStormMs ?? DEFAULT_HALT_STORM_MS))),
      String(HALT_STORM_MIN_PROBES),
    ],
  );
  const [what, reason, stormNow] = Array.isArray(reply) ? reply.map((v) => String(v)) : [];
  const halted = what === 'org' || what === 'token' ? what : null;
  if (halted) {
    await appendChange(redis, keys, {
      who: BREAKER,
      action: 'pause',
      org,
      tokenId: halted === 'token' ? tokenId : null,
      details: {
        before: { paused: null },
        after: { paused: { who: BREAKER, at: at.toISOString(), reason } },
      },
    });
  }
  return { halted, reason: reason ?? '', storm: stormNow === '1' };
}

/**
 * Forgets the sample of an organization (its tokens', the storm and its probe) or of one token:
 * a resume starts afresh.
 */
export async function clearSample(
  redis: RedisClient,
  keys: Keys,
  org: string,
  tokenId: string | null,
): Promise<void> {
  if (tokenId === null) await redis.del(keys.breaker(org));
  else await redis.hdel(keys.breaker(org), `tok:${tokenId}`);
}

/** The sample as stored (newest first), for `status` and tests: counts by kind. */
export async function readSample(
  redis: RedisClient,
  keys: Keys,
  org: string,
): Promise<{ held: number; failures: number; stale: number; storm: boolean }> {
  const [sample, storm] = await redis.hmget(keys.breaker(org), 'org', 'storm');
  const entries = sample ? sample.split(',') : [];
  return {
    held: entries.length,
    failures: entries.filter((e) => e.startsWith('f:') || e.startsWith('h:')).length,
    stale: entries.filter((e) => e.startsWith('n:')).length,
    storm: storm !== null && storm !== undefined,
  };
}
