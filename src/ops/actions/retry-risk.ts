// What a retry can do for each failure bucket, for the operator's confirmation (`confirmPermanent`):
// transient (may not repeat), permanent (the table says `fail`: the same answer unless the service
// changed), held (the pre-flight's: sending it is a decision). `claimed-elsewhere` is transient.
import { isOutcomeCode, OUTCOMES } from '../../outcomes/codes.ts';
import type { Bucket } from '../../outcomes/record.ts';

export type RetryKind = 'transient' | 'permanent' | 'held';

export function retryKind(bucket: Bucket | string): RetryKind {
  if (bucket === 'held') return 'held';
  if (isOutcomeCode(bucket) && OUTCOMES[bucket].action === 'fail') return 'permanent';
  return 'transient';
}

/** Whether a retry of this bucket needs the explicit confirmation (`confirmPermanent`). */
export function needsConfirmation(bucket: Bucket | string): boolean {
  return retryKind(bucket) !== 'transient';
}

/** What an operator is told before retrying learners of this kind. */
export const RETRY_NOTES: Readonly<Record<RetryKind, string>> = Object.freeze({
  transient: 'a retry may succeed: the failure can pass (the service or the network)',
  permanent:
    'a retry fails the same way unless something changed on the service (the learner exists now, the token may transfer it, the request is accepted)',
  held: 'held on purpose by the pre-flight (unknown to the list, or no user attached): retrying sends them anyway; an unknown learner will likely answer not-found',
});

/** The buckets of a count by code that need the explicit confirmation, in the count's order. */
export function confirmationCodes(byCode: Readonly<Record<string, number>>): string[] {
  return Object.entries(byCode)
    .filter(([code, n]) => n > 0 && needsConfirmation(code))
    .map(([code]) => code);
}
