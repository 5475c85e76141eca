// Why a transfer is a possible repeat (docs/outcomes.md), in words: the audit stream keeps the causes as
// codes (field repeatCause), the export and the learner page say them to a person.

export const REPEAT_CAUSES = {
  'lost-lease':
    'an earlier attempt never finished (its worker died or stalled past its lease), and its answer, if any, was lost',
  'no-answer':
    'an earlier attempt got no answer (a reset, a timeout, or its worker killed while the answer was on the wire)',
  'unreadable-answer':
    "an earlier attempt's answer was cut or unreadable (its 'unreadable' audit entry keeps what arrived of it)",
} as const;

export type RepeatCause = keyof typeof REPEAT_CAUSES;

/** Entries written before the causes were kept say only that an answer was lost. */
const UNKNOWN_CAUSE = 'an earlier attempt lost its answer (the release that wrote this entry kept no more)';

/** The known causes of a possible repeat, in order, from the stream's field. */
export function parseRepeatCauses(field: string | undefined): RepeatCause[] {
  return (field ?? '').split(' ').filter((c): c is RepeatCause => c in REPEAT_CAUSES);
}

/** One sentence for an auditor: what is unknown about this learner's transfer, and why. */
export function repeatReason(causes: readonly RepeatCause[]): string {
  const why = causes.length > 0 ? causes.map((c) => REPEAT_CAUSES[c]).join('; and ') : UNKNOWN_CAUSE;
  return (
    `the learner was already in the organization after ${why}: the transfer may have been that attempt's, ` +
    'and the user authorizations it revoked are not on record'
  );
}
