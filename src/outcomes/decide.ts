// What one answer of the service does to a learner, decided from the outcome table alone (codes.ts): the
// action, whether the call used an attempt, and the bucket the learner lands in. Pure: the worker calls
// it, and a test checks every code against every attempt without Redis.
import { ACTIONS, OUTCOMES, type OutcomeAction, type OutcomeCode } from './codes.ts';

export interface Decision {
  action: OutcomeAction;
  /** The learner's bucket after this answer: its own code when final, 'retrying' while it waits. */
  bucket: OutcomeCode | 'retrying';
  /** The learner will not be tried again without a person, a retry or a reconcile. */
  final: boolean;
  /** The call counts against the job's attempts (a wait for the budget or the service does not). */
  usesAttempt: boolean;
}

/**
 * `attempt` is this call's number (1 for the first) of `maxAttempts`. `unreachable`: the worker judged
 * the service unreachable for the organization (see OutcomeInfo.whenUnreachable): a code that allows it
 * waits instead, without using an attempt. `probe`: the call was the one probe of a 5xx storm
 * (docs/guard-rails.md): an answer that would be retried waits instead, without using an attempt.
 */
export function decide(
  code: OutcomeCode,
  attempt: { attempt: number; maxAttempts: number },
  options: { unreachable?: boolean; probe?: boolean } = {},
): Decision {
  const info = OUTCOMES[code];
  const action: OutcomeAction =
    (options.unreachable && info.whenUnreachable === 'wait-org') || (options.probe && info.action === 'retry')
      ? 'wait'
      : info.action;
  const rule = ACTIONS[action];
  const final =
    rule.final === 'always' || (rule.final === 'after-attempts' && attempt.attempt >= attempt.maxAttempts);
  return { action, bucket: final ? code : 'retrying', final, usesAttempt: rule.usesAttempt };
}
