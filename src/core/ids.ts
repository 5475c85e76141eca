// Learner ids and run ids: one rule each, for every door they come in by (a CSV cell, a CLI
// flag, the dashboard), so a learner one door takes, every other door serves.

/**
 * A learner id is a whole number from 1 to 2^53-1, the largest a JS number (a job's data, a
 * JSON body, a sorted-set member) holds exactly. Messages say: "--learner expects
 * ${LEARNER_ID_EXPECTED}".
 */
export const LEARNER_ID_EXPECTED = `a learner id (a whole number from 1 to ${Number.MAX_SAFE_INTEGER})`;

export function isLearnerId(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 1;
}

/**
 * A learner id from text (spaces around allowed), or why not; `shown` is the text a reason
 * quotes.
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
 * A run id is 1 to 64 letters, digits, `-` and `_`: it becomes part of Redis keys (no `:`), of a
 * directory (no `/`, `.` or space) and of the dashboard's links.
 */
const RUN_ID_RE = /^[A-Za-z0-9_-]{1,64}$/;
/** What a message says is expected: "--run expects ${RUN_ID_EXPECTED}, got '...'". */
export const RUN_ID_EXPECTED = "a run id (1 to 64 letters, digits, '-' and '_')";
/**
 * The same for a run to read, which may be a stored run of an earlier release
 * (isReadableRunId).
 */
export const READABLE_RUN_ID_EXPECTED = `${RUN_ID_EXPECTED} or the id of a stored run`;

export function isRunId(value: string): boolean {
  return RUN_ID_RE.test(value);
}

/**
 * Whether `value` may name a run to read: an id that fits the rule, or a stored run of an
 * earlier release (which took any text for `enqueue --run`). `stored` tells whether a run of
 * that id exists.
 */
export async function isReadableRunId(
  value: string,
  stored: (id: string) => Promise<boolean>,
): Promise<boolean> {
  if (isRunId(value)) return true;
  // Bounded: one key read, never a scan; no earlier release made ids anywhere near this long.
  return value.length > 0 && value.length <= 1024 && (await stored(value));
}
