// What one answer of the service does to a learner, from the outcome table alone (codes.ts): the action,
// whether it used an attempt, and the learner's bucket. Pure.
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
 * `attempt` counts from 1. `unreachable` (OutcomeInfo.whenUnreachable) and `probe` (the one probe of a
 * 5xx storm, docs/guard-rails.md): an answer that allows it waits instead, without using an attempt.
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
