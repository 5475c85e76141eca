// The transfer budget's public shapes. Times are Redis TIME in ms since the epoch; token ids are the
// non-secret fingerprints of config.ts (TokenRef.id), never a token.
import type { Rate } from '../core/duration.ts';
import type { BudgetFrees } from './budget-schedule.ts';
import type { Burst } from '../core/burst.ts';
import type { HaltAt } from '../core/halt-rule.ts';
import type { RefusalScope } from './kinds.ts';

export interface BudgetOptions {
  /** Key prefix (config.queuePrefix): every key comes from createKeys(prefix). */
  prefix: string;
  /**
   * The fallback limits (LIMIT_*): used only where the organization's policy in Redis has no value
   * (a policy never seeded: benchmarks, tests). Everything else follows the policy (policy.ts).
   */
  limitPerToken: Rate;
  limitPerOrg: Rate;
  /**
   * Called once per organization before this budget's first acquire for it: createContext seeds the
   * organization's policy from LIMIT_* there (the first time a process works for it), so that commands
   * that only read write nothing. Absent: nothing is seeded (benchmarks, tests of the fallback).
   */
  seed?: (org: string) => Promise<void>;
  /**
   * How long a permit stays in flight when its holder never settles it (crash, hang): the request
   * timeout plus a margin for a server that counts a request after the client gave up on it. Must be
   * at least the request timeout, or a slow answer could be counted after its permit left the window.
   */
  inflightTtlMs: number;
  /** The error budget's defaults (HALT_AT, HALT_SAMPLE, HALT_STORM) where the policy has none; absent: 50% of 20. */
  halt?: { haltAt: HaltAt; haltSample: number; haltStormMs?: number };
  /**
   * Called after an acquire that met rate fields of the stored policy it had to ignore (malformed:
   * outside the bounds of duration.ts readRate, e.g. "5/0" or "7/8.64e+21"), with each field and its
   * stored value; the acquire used the fallback (LIMIT_*) for them. createContext logs them as errors.
   */
  onMalformedPolicy?: (org: string, fields: ReadonlyArray<{ field: string; value: string }>) => void;
  /**
   * The fallback burst (LIMIT_BURST): the pacing buckets' size where the policy has no `burst`. Absent or
   * null: no pacing unless the policy sets one (benchmarks, tests of the windows alone).
   */
  burst?: Burst | null;
}

export type Acquired = {
  ok: true;
  permitId: string;
  tokenId: string;
  now: number;
  /** The learner's lease was taken over from an attempt that never finished: its call may have happened. */
  tookOver: boolean;
  /**
   * Key TTLs computed by this acquire from the windows in effect (token's and organization's): the
   * settle of this permit passes them on, so its log entry is kept as long as its window needs.
   */
  keyTtls: { tokenMs: number; orgMs: number };
  /** The one probe of a 5xx storm (acquire.lua "Probe"): a server error answered to it uses no attempt. */
  probe?: boolean;
};

/**
 * The learner a permit is for: its lease is taken in the same step (one call in flight per learner),
 * and the asking job must still hold its BullMQ lock.
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
  /** No permit can be granted before now + waitMs (short of a release or an unblock). Always >= 1. */
  waitMs: number;
  scope: RefusalScope;
  /**
   * Every token of the pool (or the organization) is blocked until someone unblocks it, or the pool is
   * empty: waitMs is then only a sentinel (one window), and the caller should pause and alert.
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

/** Who paused an organization or a token, and when (ISO time): `cli:user@host` or `dashboard:...`. */
export interface PauseInfo {
  who: string;
  at: string;
  /** Why, in words: a halt of the error budget (who = `breaker`) says the sample's counts. */
  reason?: string;
}

/**
 * A limit learned from the service's 429s (learn.lua), in force now: it climbs back toward `configured`
 * by one step every probe period (acquire.lua, "Learned limits") and is forgotten once it gets there.
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
   * The limit acquire enforces now, from the policy in Redis (or the fallback): for the organization,
   * its configured limit less the reserve (see BudgetView.reserve).
   */
  limit: number;
  windowMs: number;
  /** 0 when the window has room; else the ms until it has (blocks aside, see `blocked`). */
  nextFreeInMs: number;
  blocked: BlockView | null;
  /** Paused by `learner-transfer pause` (null when not). */
  paused: PauseInfo | null;
  /** A limit learned from the service's 429s that holds `limit` below the configured one (absent: none). */
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
  /** 'repeat': this permit was already learned from; 'org': the token was refuted (see learn.lua). */
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
  /** Permits of each org window kept for the organization's other clients (org.limit excludes them). */
  reserve: number;
  /** Whether a policy is stored in Redis for the organization (false: the fallback limits apply). */
  policyStored: boolean;
  /** When the permits counted now leave their windows (peekWithFrees, or peekFreesMany after a peek). */
  frees?: BudgetFrees | undefined;
  /**
   * The run window as stored (absent: none): the calendar's texts (src/limiter/run-window.ts reads them)
   * and the instants acquire.lua reads ("horizon s1 e1 ..."; '' when not written yet).
   */
  runWindow?: { windows: string; tz: string; blackout: string; open: string };
}

/**
 * Published on keys.limiterEvents(org) when budget comes back earlier than a refusal predicted
 * ('release', 'unblock'), and on every change of the organization's policy ('policy': limits set or
 * reset, pause, resume), so that a subscriber can ask again at once.
 */
export interface BudgetEvent {
  event: 'release' | 'unblock' | 'policy';
  org: string;
  tokenId: string | null;
  /** For 'policy': what changed (`limits.set`, `limits.reset`, `pause`, `resume`, `seed`). */
  change?: string;
}
