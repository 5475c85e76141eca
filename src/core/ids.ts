// Learner ids and run ids: one rule each, for every door they come in by (a CSV cell, a CLI flag, the
// dashboard's URLs, query strings and bodies). A learner one door takes, every other door must serve: the
// dashboard once refused ids past 15 digits that the CSV had queued, so those learners could not be
// seen, retried or moved ahead.

/**
 * A learner id is a whole number from 1 to 2^53-1 (Number.MAX_SAFE_INTEGER): the largest a JS number, and
 * so a job's data, a JSON body and a sorted-set member read back as a number, holds exactly. This is what
 * a message says is expected: "--learner expects ${LEARNER_ID_EXPECTED}, got '...'".
 */
export const LEARNER_ID_EXPECTED = `a learner id (a whole number from 1 to ${Number.MAX_SAFE_INTEGER})`;

export function isLearnerId(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 1;
}

/**
 * A learner id from text (surrounding spaces allowed), or why the text is not one. `shown` is the text
 * as the reason may quote it (a CSV's cell made printable, say).
 */
export function parseLearnerId(text: string, shown = text.trim()): number | string {
  const t = text.trim();
  if (t === '') return 'learner id is empty';
  if (/^[+-]?\d+(\.\d+)?([eE][+-]?\d+)?$/.test(t) && !/^\d+$/.test(t)) {
    if (t.startsWith('-')) return `learner id '${shown}' is negative`;
    return `learner id '${shown}' is not a whole number`;
  }
  if (!/^\d+$/.test(t)) return `learner id '${shown}' is not a number`;
  const n = Number(t);
  if (n === 0) return `learner id '${shown}' is zero (ids are positive)`;
  if (!Number.isSafeInteger(n)) return `learner id '${shown}' is past 2^53-1, the largest id that is exact`;
  return n;
}

/**
 * A run id is 1 to 64 letters, digits, `-` and `_`. It becomes part of Redis keys (`run:<id>`, beside
 * `run:<id>:fail`, so no `:`), of a directory (`out/<id>/`, so no `/`, `.` or space) and of the
 * dashboard's links. The ids the tool makes (newRunId: 20261122T015153-3f9a) fit.
 */
const RUN_ID_RE = /^[A-Za-z0-9_-]{1,64}$/;
/** What a message says is expected: "--run expects ${RUN_ID_EXPECTED}, got '...'". */
export const RUN_ID_EXPECTED = "a run id (1 to 64 letters, digits, '-' and '_')";
/** The same for a run to read, which may be a stored run of an earlier release (isReadableRunId). */
export const READABLE_RUN_ID_EXPECTED = `${RUN_ID_EXPECTED} or the id of a stored run`;

export function isRunId(value: string): boolean {
  return RUN_ID_RE.test(value);
}

/**
 * Whether `value` may name a run to read (report, audit, retry, the dashboard's run filter): any id that
 * fits the rule, and the stored id of a run from an earlier release, which took any text for
 * `enqueue --run`, so that those runs stay readable. New runs take only ids that fit (Runs.create).
 * `stored` tells whether a run of that id exists.
 */
export async function isReadableRunId(
  value: string,
  stored: (id: string) => Promise<boolean>,
): Promise<boolean> {
  if (isRunId(value)) return true;
  // Bounded: one key read, never a scan; no earlier release made ids anywhere near this long.
  return value.length > 0 && value.length <= 1024 && (await stored(value));
}
