// Every flag parser of the CLI: each names its flag and what it expects; a bad value is a usage
// error (exit 2) before anything connects. The command table imports this file, so it loads no
// library but commander: lists copied from modules that do are held to them by the compiler.
import { InvalidArgumentError } from 'commander';
import { parseRate, rateMessage, readRate, type Rate } from '../core/duration.ts';
import { isLearnerId, isRunId, LEARNER_ID_EXPECTED, parseLearnerId, RUN_ID_EXPECTED } from '../core/ids.ts';
import { isValidOrgKey } from '../core/keys.ts';
import { TOKEN_ID_RE } from '../limiter/token-orgs.ts';
import type { LimitFlag } from '../limiter/kinds.ts';
import { OUTCOME_CODES } from '../outcomes/codes.ts';
import type { BUCKETS } from '../outcomes/record.ts';
import type { PRIORITIES, Priority } from '../queue/priority.ts';

/** Compiles only when T is true. */
type Holds<T extends true> = T;
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;

/** The priorities of queue/priority.ts (which loads zod), in its order. */
const PRIORITY_CHOICES = ['normal', 'urgent'] as const;
type _PrioritiesMatch = Holds<Same<typeof PRIORITY_CHOICES, typeof PRIORITIES>>;

/** The buckets of outcomes/record.ts (which loads zod), in order: report's, retry's --status. */
export const BUCKET_CHOICES = [
  'queued',
  'retrying',
  ...OUTCOME_CODES,
  'worker-error',
  'claimed-elsewhere',
  'held',
  'cancelled',
  'awaiting-approval',
] as const;
type _BucketsMatch = Holds<Same<typeof BUCKET_CHOICES, typeof BUCKETS>>;

/** A whole number from `min` to `max`. */
export function wholeNumber(flag: string, min: number, max: number) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(`${flag} expects a whole number from ${min} to ${max}, got '${value}'`);
    }
    return n;
  };
}

/** A whole number from 1 to `max`. */
export function positiveInt(flag: string, max = Number.MAX_SAFE_INTEGER) {
  return wholeNumber(flag, 1, max);
}

/** A port to listen on; 0 picks a free one. */
export function portOption(flag: string) {
  return wholeNumber(flag, 0, 65535);
}

/** A learner id (the one rule of src/core/ids.ts). */
export function learnerIdOption(flag: string) {
  return (value: string): number => {
    const id = parseLearnerId(value);
    if (!isLearnerId(id))
      throw new InvalidArgumentError(`${flag} expects ${LEARNER_ID_EXPECTED}, got '${value}'`);
    return id;
  };
}

/** The id of a run to create or add to: only ids that fit the rule. */
export function runIdOption(flag: string) {
  return (value: string): string => {
    if (!isRunId(value)) throw new InvalidArgumentError(`${flag} expects ${RUN_ID_EXPECTED}, got '${value}'`);
    return value;
  };
}

/** A limit of the tool, with the parser and message of LIMIT_* and the dashboard (readRate). */
export function rateOption(flag: string) {
  return (value: string): Rate => {
    const read = readRate(value);
    if (!read.ok) throw new InvalidArgumentError(rateMessage(flag, value, read.why));
    return read.rate;
  };
}

/** A limit the simulated service enforces: any rate parseRate reads, not the tool's bounds. */
export function serviceRateOption(flag: string) {
  return (value: string): Rate => {
    const r = parseRate(value);
    if (!r)
      throw new InvalidArgumentError(`${flag} expects N/DURATION like 100/1h or 100/4s, got '${value}'`);
    return r;
  };
}

/** A token id as tokens list shows it (a fingerprint: never the secret). */
export function tokenIdOption(value: string): string {
  if (!TOKEN_ID_RE.test(value)) {
    throw new InvalidArgumentError(
      `--token expects a token id of 12 hex digits (see tokens list), got '${value}'`,
    );
  }
  return value;
}

/** An organization key as LEARNER_API_TOKENS names it. */
export function orgKeyOption(value: string): string {
  if (!isValidOrgKey(value)) {
    throw new InvalidArgumentError(
      `--org expects an organization key (letters, digits, _ or -), got '${value}'`,
    );
  }
  return value;
}

/** Repeatable --org-id KEY=N. */
export function orgIdPairOption(
  value: string,
  previous: Record<string, number> = {},
): Record<string, number> {
  const m = /^\s*([^=\s]+)\s*=\s*(\d+)\s*$/.exec(value);
  const id = m ? Number(m[2]) : NaN;
  if (!m || !m[1] || !isValidOrgKey(m[1]) || !Number.isSafeInteger(id) || id < 1) {
    throw new InvalidArgumentError(`--org-id expects KEY=N like acme=1, got '${value}'`);
  }
  return { ...previous, [m[1]]: id };
}

/** --priority. */
export function priorityOption(value: string): Priority {
  const v = value.trim().toLowerCase();
  if (!(PRIORITY_CHOICES as readonly string[]).includes(v)) {
    throw new InvalidArgumentError(
      `--priority expects one of ${PRIORITY_CHOICES.join(', ')}, got '${value}'`,
    );
  }
  return v as Priority;
}

/** A share from 0 to 1. */
export function shareOption(flag: string) {
  return (value: string): number => {
    const n = Number(value);
    if (value.trim() === '' || !Number.isFinite(n) || n < 0 || n > 1) {
      throw new InvalidArgumentError(`${flag} expects a share from 0 to 1 like 0.05, got '${value}'`);
    }
    return n;
  };
}

/** "20-200" (milliseconds) or a single "50". */
export function latencyRangeOption(value: string): [number, number] {
  const m = /^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$/.exec(value);
  const min = Number(m?.[1]);
  const max = m?.[2] === undefined ? min : Number(m[2]);
  if (!m || !(min <= max)) {
    throw new InvalidArgumentError(`--latency expects MIN-MAX in milliseconds like 20-200, got '${value}'`);
  }
  return [min, max];
}

/** A flag of `limits set` (limiter/kinds.ts): its parser's LT_USAGE error as commander's. */
export function limitFlagOption(flag: LimitFlag) {
  return (value: string): unknown => {
    try {
      return flag.parse(value);
    } catch (err) {
      throw new InvalidArgumentError((err as Error).message);
    }
  };
}

const DAY_RE = /^\d{4}-\d{2}-\d{2}$/;
const TIME_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2})$/;

/**
 * A UTC day (2026-11-26) or an ISO time with its zone (2026-11-26T08:00:00Z). A day given to --until
 * means its whole day: --since 2026-11-01 --until 2026-11-30 is November.
 */
export function dateOption(flag: string, endOfDay: boolean) {
  return (value: string): number => {
    const v = value.trim();
    const ms = DAY_RE.test(v) ? Date.parse(`${v}T00:00:00Z`) : TIME_RE.test(v) ? Date.parse(v) : NaN;
    if (!Number.isFinite(ms)) {
      throw new InvalidArgumentError(
        `${flag} expects a UTC day like 2026-11-26 or a time with its zone like 2026-11-26T08:00:00Z, got '${value}'`,
      );
    }
    return DAY_RE.test(v) && endOfDay ? ms + 86_400_000 - 1 : ms;
  };
}

const EMAIL_RE = /^[^\s@]+@[^\s@]+$/;

/** --email of audit forget. */
export function emailOption(value: string): string {
  const v = value.trim();
  if (!EMAIL_RE.test(v)) throw new InvalidArgumentError(`--email expects an e-mail address, got '${value}'`);
  return v;
}

/** --user-id of audit forget. */
export function userIdOption(value: string): number {
  const n = Number(value.trim());
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n))
    throw new InvalidArgumentError(
      `--user-id expects a whole number (the service's user id), got '${value}'`,
    );
  return n;
}
