// The per-learner outcome record: compact JSON, one hash per organization (short field names: a
// migration holds a million of them).
import { createHash } from 'node:crypto';
import * as z from 'zod';
import { isOutcomeCode, OUTCOME_CODES, OUTCOMES, type OutcomeCode } from './codes.ts';

/**
 * Where a learner stands: `queued`, `retrying`, then a final outcome code; exactly one bucket at a time.
 * The buckets after the codes are not answers of the service (docs/outcomes.md): `worker-error` (BullMQ
 * failed the job), `claimed-elsewhere`, `held` (the pre-flight), `cancelled` (final, not a failure) and
 * `awaiting-approval` (a canary run's, docs/canary.md). New ones are appended: old records never hold them.
 */
export const BUCKETS = [
  'queued',
  'retrying',
  ...OUTCOME_CODES,
  'worker-error',
  'claimed-elsewhere',
  'held',
  'cancelled',
  'awaiting-approval',
] as const;
export type Bucket =
  | 'queued'
  | 'retrying'
  | OutcomeCode
  | 'worker-error'
  | 'claimed-elsewhere'
  | 'held'
  | 'cancelled'
  | 'awaiting-approval';

/** The bucket of a learner withdrawn by an operator before its call. */
export const CANCELLED = 'cancelled' satisfies Bucket;

/** The bucket of a canary run's learner past its canary, until the run is approved. */
export const AWAITING_APPROVAL = 'awaiting-approval' satisfies Bucket;

/**
 * Buckets that are final (the learner will not move without a person or a reconcile). A learner awaiting
 * approval is not final (it is neither done nor failed), nor waiting for a worker (it has no job).
 */
export function isFinalBucket(bucket: Bucket): boolean {
  return bucket !== 'queued' && bucket !== 'retrying' && bucket !== AWAITING_APPROVAL;
}

/** A bucket whose outcome code the table calls a success: the learner is in the organization. */
export function isSuccessBucket(bucket: Bucket): boolean {
  return isOutcomeCode(bucket) && OUTCOMES[bucket].success;
}

/**
 * Final buckets that are not a success: the failures a person sees, and `retry` re-queues. `cancelled`
 * is not one: a person withdrew it on purpose, and only naming it again re-opens it.
 */
export const FAILURE_BUCKETS: readonly Bucket[] = BUCKETS.filter(
  (b) => isFinalBucket(b) && !isSuccessBucket(b) && b !== CANCELLED,
);

/** Buckets that get a sorted-set index: not the big success or queued ones. */
export function isIndexedBucket(bucket: Bucket): boolean {
  return bucket !== 'queued' && !isSuccessBucket(bucket);
}

const attemptSchema = z.tuple([
  z.number(), // time (ms)
  z.string(), // outcome code
  z.number(), // HTTP status (0 = none)
  z.number(), // duration ms
]);
export type AttemptEntry = z.infer<typeof attemptSchema>;

// Lua's cjson writes an empty array as {}: read it back as [].
const list = <T extends z.ZodTypeAny>(item: T) =>
  z.preprocess(
    (v) => (v && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length === 0 ? [] : v),
    z.array(item),
  );

export const recordSchema = z.object({
  /** bucket */
  b: z.string(),
  /** run id */
  r: z.string(),
  /** enqueued at (ms) */
  q: z.number(),
  /** updated at (ms) */
  t: z.number(),
  /** source: "file.csv:12", "crawl:page 4", "reconcile" */
  src: z.string().optional(),
  /** last outcome code, HTTP status, error title, message */
  c: z.string().optional(),
  s: z.number().optional(),
  e: z.string().optional(),
  m: z.string().optional(),
  /** attempts made (calls that reached the point of an outcome, 429/401 waits excluded) */
  a: z.number().default(0),
  /** transfer id of the effective transfer, once known */
  x: z.string().optional(),
  /** token id (fingerprint) of the last attempt */
  k: z.string().optional(),
  /** stream ids of this learner's audit entries (effective transfers), newest last */
  au: list(z.string()).optional(),
  /** last attempts, newest last, at most MAX_HISTORY */
  h: list(attemptSchema).optional(),
  /** ids of the last attempts merged into this record (a replayed attempt is merged once) */
  ai: list(z.string()).optional(),
  /** 1: a 200 that may repeat a transfer whose own answer was lost (see finish-attempt.lua) */
  pr: z.number().optional(),
  /** 1: an attempt took the lease over from a holder that died mid-call. */
  ll: z.number().optional(),
  /** Audit dedupe keys of this learner's entries (non-final records only: deleted when compacted). */
  ak: list(z.string()).optional(),
  /** Compacted: the stream id of the 'record' audit entry that holds its history and audit ids. */
  f: z.string().optional(),
  /** What a compacted history said of lost answers (n: no answer, u: unreadable). */
  hc: z.string().optional(),
  /** Compacted: the last merged attempt ids, as shortAttemptId (replay check). */
  ah: list(z.string()).optional(),
  /** Cancelled: who withdrew the learner (`cli:user@host`, `dashboard:...`); when is `t`. */
  cb: z.string().optional(),
  /** The organization the learner list showed before the transfer (for `report --reverse`). */
  po: z.number().int().optional(),
});
export type OutcomeRecord = z.infer<typeof recordSchema>;

export const MAX_HISTORY = 10;

/** An attempt id as a compacted record keeps it (`ah`): the first 10 hex of its SHA-1 (compact.lua). */
export function shortAttemptId(id: string): string {
  return createHash('sha1').update(id).digest('hex').slice(0, 10);
}

export function decodeRecord(text: string | null | undefined): OutcomeRecord | undefined {
  if (!text) return undefined;
  try {
    const parsed = recordSchema.safeParse(JSON.parse(text));
    if (!parsed.success) return undefined;
    const r = parsed.data;
    // A compacted record leaves out an outcome code equal to its bucket (finish-attempt.lua, compact).
    if (r.f !== undefined && r.c === undefined && r.b !== 'queued' && r.b !== 'retrying') r.c = r.b;
    return r;
  } catch {
    return undefined;
  }
}

/** The public, spelled-out view of a record (reports, dashboard, JSON API). */
export interface LearnerOutcome {
  org: string;
  learnerId: number;
  state: Bucket;
  outcome: OutcomeCode | null;
  httpStatus: number | null;
  error: string | null;
  message: string | null;
  attempts: number;
  runId: string;
  source: string | null;
  enqueuedAt: string;
  updatedAt: string;
  transferId: string | null;
  tokenId: string | null;
  auditIds: string[];
  /** A 200 that may repeat a transfer whose own answer was lost. */
  possibleRepeat: boolean;
  /** Who cancelled the learner (state `cancelled`), else null; `updatedAt` says when. */
  cancelledBy: string | null;
  /** The organization the learner was in before the transfer, when read from the list. */
  previousOrgId: number | null;
  history: { at: string; outcome: string; httpStatus: number | null; durationMs: number }[];
}

export function toLearnerOutcome(org: string, learnerId: number, r: OutcomeRecord): LearnerOutcome {
  return {
    org,
    learnerId,
    state: r.b as Bucket,
    outcome: (r.c as OutcomeCode | undefined) ?? null,
    httpStatus: r.s ?? null,
    error: r.e ?? null,
    message: r.m ?? null,
    attempts: r.a,
    runId: r.r,
    source: r.src ?? null,
    enqueuedAt: new Date(r.q).toISOString(),
    updatedAt: new Date(r.t).toISOString(),
    transferId: r.x ?? null,
    tokenId: r.k ?? null,
    auditIds: r.au ?? [],
    possibleRepeat: r.pr === 1,
    cancelledBy: r.cb ?? null,
    previousOrgId: r.po ?? null,
    history: (r.h ?? []).map(([t, c, s, d]) => ({
      at: new Date(t).toISOString(),
      outcome: c,
      httpStatus: s === 0 ? null : s,
      durationMs: Math.round(d),
    })),
  };
}
