// The transfer budget's public shapes. Times are Redis TIME in ms; token ids are non-secret
// fingerprints (TokenRef.id).
import type { Rate } from '../core/duration.ts';
import type { BudgetFrees } from './budget-schedule.ts';
import type { Burst } from '../core/burst.ts';
import type { HaltAt } from '../core/halt-rule.ts';
import type { RefusalScope } from './kinds.ts';

export interface BudgetOptions {
  /** Key prefix (config.queuePrefix): every key comes from createKeys(prefix). */
  prefix: string;
  /** The fallback limits (LIMIT_*), where the policy in Redis has no value. */
  limitPerToken: Rate;
  limitPerOrg: Rate;
  /**
   * Called once per organization before its first acquire: createContext seeds the policy
   * there, so read-only commands write nothing. Absent: nothing is seeded.
   */
  seed?: (org: string) => Promise<void>;
  /**
   * How long a permit stays in flight when never settled: the request timeout plus a margin. At
   * least the request timeout, or a slow answer could be counted after its permit left the
   * window.
   */
  inflightTtlMs: number;
  /** The error budget's defaults (HALT_*) where the policy has none; absent: 50% of 20. */
  halt?: { haltAt: HaltAt; haltSample: number; haltStormMs?: number };
  /**
   * Called after an acquire that ignored malformed rate fields of the stored policy ("5/0"),
   * with each field and value; the acquire used LIMIT_* for them.
   */
  onMalformedPolicy?: (org: string, fields: ReadonlyArray<{ field: string; value: string }>) => void;
  /** The fallback burst (LIMIT_BURST) where the policy has none; absent or null: no pacing. */
  burst?: Burst | null;
}

export type Acquired = {
  ok: true;
  permitId: string;
  tokenId: string;
  now: number;
  /**
   * The learner's lease was taken over from an unfinished attempt: its call may have happened.
   */
  tookOver: boolean;
  /**
   * Key TTLs from the windows in effect: the settle passes them on, so the log entry lives as
   * long as needed.
   */
  keyTtls: { tokenMs: number; orgMs: number };
  /** The one probe of a 5xx storm: a server error answered to it uses no attempt. */
  probe?: boolean;
};

/**
 * The learner a permit is for: its lease is taken in the same step, and the job must hold its
 * BullMQ lock.
 */
export interface LeaseRequest {
  learnerId: number;
  /** Unique to this attempt (the job's lock token): the lease is freed only by its holder. */
  holder: string;
  /** BullMQ lock key of the job, and the token it must hold ('' when not run by a BullMQ worker). */
  lockKey: string;
  lockToken: string;
  /** How long an expired lease of another holder is contested before a takeover (ms). */
  graceMs: number;
}

/** What held the refusal: the scope whose wait is the longest (kinds.ts lists them). */
export type { RefusalScope };

export type Refused = {
  ok: false;
  /** No permit can be granted before now + waitMs (short of a release or unblock); >= 1. */
  waitMs: number;
  scope: RefusalScope;
  /**
   * Every token of the pool (or the organization) is blocked until unblocked, or the pool is
   * empty: waitMs is a sentinel, and the caller should pause and alert.
   */
  allBlockedIndefinitely: boolean;
  now: number;
};

export interface BlockView {
  /** The reason given to block(), such as '429' or '401'. */
  reason: string;
  /** Time left, or null when the block lasts until unblock. */
  remainingMs: number | null;
}

/**
 * Who paused an organization or a token, and when (ISO time): `cli:user@host`, `dashboard:...`.
 */
export interface PauseInfo {
  who: string;
  at: string;
  /** Why, in words: a halt of the error budget (who = `breaker`) says the sample's counts. */
  reason?: string;
}

/**
 * A limit learned from the service's 429s (learn.lua), in force now: it climbs back toward
 * `configured` one step every probe period, and is forgotten there.
 */
export interface LearnedView {
  /** What the service had accepted in its window when it answered 429: the limit learned. */
  max: number;
  /** When it was learned (Redis ms). */
  at: number;
  /** The limit without it (for the organization: less the reserve). `limit` is the one in force. */
  configured: number;
  /** Until the next probe step raises it (ms). */
  nextProbeInMs: number;
}

export interface ScopeView {
  /** Permits counted in the window that are no longer in flight (settled or expired). */
  used: number;
  /** Permits in flight: acquired, not yet settled, deadline not passed. */
  inflight: number;
  remaining: number;
  /**
   * The limit acquire enforces now (for the organization: the configured one less the reserve).
   */
  limit: number;
  windowMs: number;
  /** 0 when the window has room; else the ms until it has (blocks aside, see `blocked`). */
  nextFreeInMs: number;
  blocked: BlockView | null;
  /** Paused by `learner-transfer pause` (null when not). */
  paused: PauseInfo | null;
  /** A limit learned from 429s that holds `limit` below the configured one (absent: none). */
  learned?: LearnedView;
  /** The scope's pacing bucket (acquire.lua "Pacing"); absent when it does not pace. */
  pace?: PaceView;
}

/** A pacing bucket as peek reads it. */
export interface PaceView {
  /** Its size: permits at once from a full bucket. */
  burst: number;
  /** Permits it allows at once now (0..burst). */
  available: number;
  /** Until it allows one (0: now). */
  nextInMs: number;
  /** One permit back every this many ms (window / limit, a float). */
  intervalMs: number;
  /** Its tat less now (<= 0: full), for the ETA's simulation. */
  tatInMs: number;
}

export interface TokenView extends ScopeView {
  tokenId: string;
  /** The token has a limit of its own (`limits set --token ID --per-token N/DUR`). */
  override: boolean;
  /** The 429s the service answered on this token, all processes together (absent: none counted). */
  rateLimited?: number;
}

/** What learn() did with a 429 (learn.lua's output). */
export interface LearnResult {
  /** The token's 429s so far. */
  rateLimited: number;
  /**
   * 'repeat': this permit was already learned from; 'org': the token was refuted (learn.lua).
   */
  cause: 'token' | 'org' | 'repeat';
  token: {
    /** What the service had accepted on the token in its window when it refused. */
    accepted: number;
    /** The limit in force before this 429. */
    limit: number;
    /** The limit learned now (null: unchanged). */
    learned: number | null;
  };
  org: {
    /** null when not counted (only a refuted token needs it). */
    accepted: number | null;
    limit: number;
    learned: number | null;
  };
}

export interface BudgetView {
  now: number;
  org: ScopeView;
  tokens: TokenView[];
  /** Permits of each org window kept for the organization's other clients. */
  reserve: number;
  /** Whether a policy is stored in Redis for the organization (false: the fallback limits apply). */
  policyStored: boolean;
  /** When the permits counted now leave their windows (peekWithFrees, or peekFreesMany). */
  frees?: BudgetFrees | undefined;
  /**
   * The run window as stored (absent: none): the calendar's texts (run-window.ts) and
   * acquire.lua's instants.
   */
  runWindow?: { windows: string; tz: string; blackout: string; open: string };
}

/**
 * Published on keys.limiterEvents(org) when budget comes back early ('release', 'unblock') and
 * on each policy change ('policy'), so a subscriber asks again at once.
 */
export interface BudgetEvent {
  event: 'release' | 'unblock' | 'policy';
  org: string;
  tokenId: string | null;
  /** For 'policy': what changed (`limits.set`, `limits.reset`, `pause`, `resume`, `seed`). */
  change?: string;
}
