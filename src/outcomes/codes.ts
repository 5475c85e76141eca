// The stable outcome codes and what the worker does with each, in one table (decision 2). Changing a
// code is a breaking change for operators.

export const OUTCOME_CODES = [
  'transferred',
  'already-in-org',
  'not-found',
  'forbidden',
  'invalid-request',
  'server-error',
  'network-error',
  'bad-response',
  'unexpected-result',
  'rate-limited',
  'unauthorized',
] as const;
export type OutcomeCode = (typeof OUTCOME_CODES)[number];

/**
 * complete      - the learner is in the organization: job done.
 * fail          - fail for good (UnrecoverableError): retrying cannot help; a person must look.
 * retry         - retry with exponential backoff and jitter, up to ATTEMPTS.
 * wait          - wait without using an attempt (the budget or the service said "later").
 * pause-token   - the token is refused: stop using it, alert, re-queue without using an attempt.
 */
export type OutcomeAction = 'complete' | 'fail' | 'retry' | 'wait' | 'pause-token';

/** What each action means for the learner's place in the outcome store and its attempts. */
export const ACTIONS: Readonly<
  Record<
    OutcomeAction,
    {
      /** 'always': the code is the learner's final bucket; 'after-attempts': once ATTEMPTS are used up. */
      final: 'always' | 'after-attempts' | 'never';
      /** Whether the call counts against the job's ATTEMPTS. */
      usesAttempt: boolean;
    }
  >
> = Object.freeze({
  complete: { final: 'always', usesAttempt: true },
  fail: { final: 'always', usesAttempt: true },
  retry: { final: 'after-attempts', usesAttempt: true },
  wait: { final: 'never', usesAttempt: false },
  'pause-token': { final: 'never', usesAttempt: false },
});

/**
 * The audit entry of an answer with a body: the transfer result, an 'unexpected' valid 200 (not this
 * learner's transfer), or an 'unreadable' body (its prefix, length and hash).
 */
export type AuditKind = 'transfer' | 'unexpected' | 'unreadable';

export interface OutcomeInfo {
  action: OutcomeAction;
  /**
   * 'wait-org': the code may mean the service is unreachable. When the request never left, or after
   * UNREACHABLE_STREAK in a row, the organization is blocked briefly and the learner waits without an attempt.
   */
  whenUnreachable?: 'wait-org';
  /** Final success for exit codes and reports: the learner is in the organization. */
  success: boolean;
  /** The audit entry of an answer with this code when it brought a body (see AuditKind). */
  audit: AuditKind | null;
  /** A list read (crawl, reconcile) answered with this code stops: retrying cannot help. */
  crawlStops: boolean;
  /**
   * How a final outcome feeds the error budget (docs/guard-rails.md): 'not-found' fails only when a list
   * showed the learner; 'at-once' halts at once; null: not the service's judgement (network, 429, 401).
   */
  halt: 'success' | 'failure' | 'not-found' | 'at-once' | null;
  description: string;
}

export const OUTCOMES: Readonly<Record<OutcomeCode, OutcomeInfo>> = Object.freeze({
  transferred: {
    action: 'complete',
    success: true,
    audit: 'transfer',
    crawlStops: false,
    halt: 'success',
    description: 'transferred into the organization (200)',
  },
  'already-in-org': {
    action: 'complete',
    success: true,
    audit: 'transfer',
    crawlStops: false,
    halt: 'success',
    description:
      'already in the organization (400 "already associated", or a 200 repeat with no new transfer)',
  },
  'not-found': {
    action: 'fail',
    success: false,
    audit: null,
    crawlStops: true,
    halt: 'not-found',
    description: 'no learner with this id (404)',
  },
  forbidden: {
    action: 'fail',
    success: false,
    audit: null,
    crawlStops: true,
    halt: 'failure',
    description: 'the token may not transfer this learner (403)',
  },
  'invalid-request': {
    action: 'fail',
    success: false,
    audit: null,
    crawlStops: true,
    halt: 'failure',
    description: 'the service refused the request for another reason (400 or other 4xx)',
  },
  'server-error': {
    action: 'retry',
    success: false,
    audit: null,
    crawlStops: false,
    halt: 'failure',
    description: 'the service failed (500 and other 5xx)',
  },
  'network-error': {
    action: 'retry',
    whenUnreachable: 'wait-org',
    success: false,
    audit: null,
    crawlStops: false,
    halt: null,
    description: 'connection refused, reset or timed out; the transfer may or may not have happened',
  },
  'bad-response': {
    action: 'retry',
    success: false,
    audit: 'unreadable',
    crawlStops: false,
    halt: 'failure',
    description:
      'a response the schema does not accept (e.g. a cut 200 body): the transfer may have happened',
  },
  'unexpected-result': {
    action: 'fail',
    success: false,
    audit: 'unexpected',
    crawlStops: false,
    halt: 'at-once',
    description:
      'the service answered 200 with a valid body, but not for this learner or not "completed": the ' +
      'transfer may or may not have happened, so a person must look; the body is kept in the audit stream',
  },
  'rate-limited': {
    action: 'wait',
    success: false,
    audit: null,
    crawlStops: false,
    halt: null,
    description: 'the service said 429: wait for Retry-After without using an attempt',
  },
  unauthorized: {
    action: 'pause-token',
    success: false,
    audit: null,
    crawlStops: false,
    halt: null,
    description: 'the token was refused (401): the token is paused, the learner waits for another token',
  },
});

/** The outcome codes that mean the learner is in the organization. */
export const SUCCESS_CODES: readonly OutcomeCode[] = OUTCOME_CODES.filter((c) => OUTCOMES[c].success);

/** Errors in a row without an answer that make an organization's service count as unreachable. */
export const UNREACHABLE_STREAK = 3;

export function isOutcomeCode(value: string): value is OutcomeCode {
  return (OUTCOME_CODES as readonly string[]).includes(value);
}
