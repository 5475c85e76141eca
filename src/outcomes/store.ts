// The outcome store's writes: where every learner stands, per organization, in Redis (store-reads.ts
// holds the reads).
import type { ChainableCommander } from 'ioredis';
import type { RedisClient } from '../redis/client.ts';
import { loadScripts } from '../redis/scripts.ts';
import type { Keys } from '../core/keys.ts';
import { randomUUID } from 'node:crypto';
import { AuditStream } from './audit-stream.ts';
import {
  BUCKETS,
  FAILURE_BUCKETS,
  isFinalBucket,
  isIndexedBucket,
  isSuccessBucket,
  type Bucket,
  type OutcomeRecord,
} from './record.ts';
import { LearnerTransferError } from '../core/errors.ts';
import { OutcomeReader } from './store-reads.ts';

export type { RunCounts } from './store-reads.ts';

// The outcome store's scripts; the record moves the same way in each (includes/record.lua).
export const OUTCOME_SCRIPTS = loadScripts(new URL('./', import.meta.url), [
  'finish-attempt',
  'record-outcome',
  'compact-records',
  'cancel-learners',
]);
const INDEXED_BUCKETS = BUCKETS.filter(isIndexedBucket);
const INDEXED = INDEXED_BUCKETS.join(' ');
const SUCCESS = BUCKETS.filter(isSuccessBucket).join(' ');
const FAILURE = FAILURE_BUCKETS.join(' ');

type Arg = string | number;

/**
 * Everything one attempt leaves in Redis, as plain data: the worker writes it to its spool before the
 * first Redis write, and a replay (this process later, or the next one) passes the same to finish().
 */
export interface FinishArgs {
  org: string;
  learnerId: number;
  runId: string;
  /** Time of the attempt (ms): the record's and the history's time, even when replayed later. */
  at: number;
  /** Unique per call: merged once, however often it is replayed. */
  attemptId: string;
  /** Absent: the attempt ended before a call; only the permit and lease are freed. */
  update?: {
    b: Bucket;
    c: string;
    s?: number | undefined;
    e?: string | undefined;
    m?: string | undefined;
    k?: string | undefined;
    x?: string | undefined;
    /** duration ms */
    d: number;
    /** 1 when it costs the learner an attempt */
    n: 0 | 1;
    /** 1 for a 200 that reads as a success */
    ok?: 0 | 1;
    /** 1 when the lease was taken over from an attempt that never finished */
    lost?: 0 | 1;
  };
  permit?:
    | {
        tokenId: string;
        permitId: string;
        mode: 'response' | 'abandon' | 'release';
        tokenKeyTtlMs: number;
        orgKeyTtlMs: number;
      }
    | undefined;
  /** The lease holder this attempt frees. */
  holder?: string | undefined;
  audit?:
    | {
        /** The transfer id, or the spool entry id for a body without one. */
        key: string;
        transferId: string;
        /** The body as the service sent it (tokens scrubbed). */
        raw: string;
        kind: 'transfer' | 'unreadable' | 'unexpected';
        /** Why a body is kept unread ('' when it was read). */
        reason?: string | undefined;
        /** An unreadable body kept as its prefix (raw): its whole length and SHA-256 (body-archive.ts). */
        body?: { bytes: number; sha256: string } | undefined;
      }
    | undefined;
}

export interface FinishResult {
  auditId: string | undefined;
  bucket: Bucket;
  /** The attempt was merged before (a replay): nothing was written twice. */
  replayed: boolean;
  possibleRepeat: boolean;
}

export interface QueueMark {
  org: string;
  learnerId: number;
  runId: string;
  source: string;
  /**
   * Re-open a final record: true for any, or a time (ms): only records updated before it (a reconcile's
   * walk start, so a learner a worker moved after its page was read is not transferred again).
   */
  force: boolean | number;
  /**
   * Re-open a `cancelled` record too (a person named the learner again: enqueue --csv, retry --learner).
   * Without it a cancelled learner stays cancelled (a crawl's next pass does not undo a cancel).
   */
  reopenCancelled?: boolean | undefined;
  /** The organization the learner list showed: kept as `po` for `report --reverse`. */
  previousOrgId?: number | undefined;
  /** The new record's bucket: `queued`, or `awaiting-approval` past a canary (docs/canary.md). */
  bucket?: 'queued' | 'awaiting-approval' | undefined;
}

/** What marking a learner queued found: new, re-opened, or kept (with the bucket it was in). */
/** `awaiting`: a canary run's learner written `awaiting-approval`, past the canary (markQueued's `canary`). */
export type MarkResult =
  | { kind: 'new'; awaiting?: true }
  | { kind: 'reopened'; from: Bucket; awaiting?: true }
  | { kind: 'kept'; bucket: Bucket };

/** record-outcome.lua's word for a learner: its old bucket, "skip:<bucket>" or "wait:<old bucket>". */
function markResult(text: string): MarkResult {
  if (text.startsWith('skip:')) return { kind: 'kept', bucket: text.slice(5) as Bucket };
  const awaiting = text.startsWith('wait:');
  const from = awaiting ? text.slice(5) : text;
  const found: MarkResult = from === '' ? { kind: 'new' } : { kind: 'reopened', from: from as Bucket };
  return awaiting ? { ...found, awaiting: true } : found;
}

export interface AttemptUpdate {
  bucket: Bucket;
  code: string;
  status?: number | undefined;
  error?: string | undefined;
  message?: string | undefined;
  durationMs: number;
  tokenId?: string | undefined;
  transferId?: string | undefined;
  /** Stream id of the audit entry this attempt wrote (successful transfers). */
  auditId?: string | undefined;
  /** false for 429 / 401 waits, which do not cost the learner an attempt. */
  countsAsAttempt: boolean;
}

/** What cancel-learners.lua decided for one learner. */
export type CancelDecision =
  | { kind: 'cancelled'; runId: string }
  | { kind: 'in-flight' }
  | { kind: 'none' }
  | { kind: 'state'; bucket: Bucket }
  | { kind: 'run'; runId: string };

export interface CancelArgs {
  /** Who cancels (change-log actor: `cli:user@host`, `dashboard:...`), kept in the record. */
  who: string;
  /** Decide only: nothing written. */
  dryRun: boolean;
  /** The lease grace of acquire.lua: a lease is in flight until deadline + grace. */
  leaseGraceMs: number;
  /** The runs the learners' records may name (declared keys). */
  runIds: readonly string[];
  now?: number;
}

export class OutcomeStore extends OutcomeReader {
  readonly #stream: AuditStream;

  constructor(redis: RedisClient, keys: Keys) {
    // Before any pipeline is made from the client: a pipeline takes the commands its client has.
    OUTCOME_SCRIPTS.define(redis);
    super(redis, keys);
    this.#stream = new AuditStream(redis, keys);
  }

  /** One script call for records of one organization and one run. */
  #call(
    pipeline: ChainableCommander,
    org: string,
    runId: string,
    now: number,
    records: readonly { learnerId: number; record: OutcomeRecord }[],
    mode: 'set' | 'enqueue' | 'enqueue-cancelled' | 'approve',
    force: boolean | number,
    canary?: number,
  ) {
    const k = this.keys;
    const args: Arg[] = [];
    for (const { learnerId, record } of records)
      args.push(String(learnerId), JSON.stringify(record), record.b);
    const keys = [
      k.outcomes(org),
      k.runCounters(org, runId),
      k.orgCounts(org),
      k.runFailures(org, runId),
      ...this.#indexKeys(org),
    ];
    return OUTCOME_SCRIPTS.queue(pipeline, 'record-outcome', keys, [
      runId,
      now,
      FAILURE,
      INDEXED,
      mode,
      String(force === true ? Number.MAX_SAFE_INTEGER : force === false ? 0 : force),
      canary === undefined ? '' : String(canary),
      ...args,
    ]);
  }

  #indexKeys(org: string): string[] {
    return INDEXED_BUCKETS.map((b) => this.keys.outcomeIndex(org, b));
  }

  /**
   * Marks a batch of learners `queued` in one round trip; final records are kept unless forced. With
   * `canary` (a canary run's size), each organization's learners of the run past it are written
   * `awaiting-approval` instead, counted in the script (docs/canary.md).
   */
  async markQueued(items: readonly QueueMark[], now = Date.now(), canary?: number): Promise<MarkResult[]> {
    if (items.length === 0) return [];
    // One script call per (organization, run, force) group, in one round trip.
    type Group = { org: string; runId: string; force: boolean | number; reopen: boolean; at: number[] };
    const groups = new Map<string, Group>();
    items.forEach((it, i) => {
      const reopen = it.reopenCancelled === true;
      const key = `${it.org}\u0000${it.runId}\u0000${String(it.force)}\u0000${String(reopen)}`;
      let g = groups.get(key);
      if (!g) groups.set(key, (g = { org: it.org, runId: it.runId, force: it.force, reopen, at: [] }));
      g.at.push(i);
    });
    // One pipeline per organization, sent together: an organization's keys share one slot, and a Redis
    // Cluster refuses a pipeline whose keys live on different nodes.
    const byOrg = new Map<string, Group[]>();
    for (const g of groups.values()) byOrg.set(g.org, [...(byOrg.get(g.org) ?? []), g]);
    const ordered = [...byOrg.values()].flat();
    const replies = (
      await Promise.all(
        [...byOrg.values()].map(async (list) => {
          const pipe = this.redis.pipeline();
          for (const g of list) {
            const records = g.at.map((i) => {
              const it = items[i] as QueueMark;
              const record: OutcomeRecord = {
                b: it.bucket ?? 'queued',
                r: it.runId,
                q: now,
                t: now,
                src: it.source,
                a: 0,
                ...(it.previousOrgId !== undefined ? { po: it.previousOrgId } : {}),
              };
              return { learnerId: it.learnerId, record };
            });
            const mode = g.reopen ? 'enqueue-cancelled' : 'enqueue';
            this.#call(pipe, g.org, g.runId, now, records, mode, g.force, canary);
          }
          return (await pipe.exec()) ?? [];
        }),
      )
    ).flat();
    const out: MarkResult[] = new Array(items.length);
    ordered.forEach((g, gi) => {
      const [err, reply] = replies[gi] ?? [new LearnerTransferError('LT_INTERNAL', 'no reply'), null];
      if (err) throw err;
      const texts = reply as string[];
      g.at.forEach((i, j) => {
        out[i] = markResult(String(texts[j] ?? ''));
      });
    });
    return out;
  }

  /**
   * Moves an approved canary run's learners still `awaiting-approval` to `queued` (a cancel or another
   * approve meanwhile wins). Returns the ids that moved; their jobs are the caller's to add.
   */
  async approve(
    org: string,
    runId: string,
    learnerIds: readonly number[],
    now = Date.now(),
  ): Promise<number[]> {
    const moved: number[] = [];
    for (let i = 0; i < learnerIds.length; i += 1000) {
      const chunk = learnerIds.slice(i, i + 1000);
      const pipe = this.redis.pipeline();
      // Mode 'approve' keeps the stored record: only this one's bucket counts.
      const records = chunk.map((learnerId) => ({
        learnerId,
        record: { b: 'queued', r: runId, q: now, t: now, a: 0 } satisfies OutcomeRecord,
      }));
      this.#call(pipe, org, runId, now, records, 'approve', false);
      const [[err, reply] = [null, []]] = (await pipe.exec()) ?? [];
      if (err) throw err;
      (reply as string[]).forEach((text, j) => {
        if (!String(text).startsWith('skip:')) moved.push(chunk[j] as number);
      });
    }
    return moved;
  }

  /** Withdraws learners before their call; jobs and claims are the caller's. */
  async cancel(org: string, learnerIds: readonly number[], a: CancelArgs): Promise<CancelDecision[]> {
    if (learnerIds.length === 0) return [];
    const k = this.keys;
    const keys = [
      k.outcomes(org),
      k.orgCounts(org),
      k.lease(org),
      ...a.runIds.flatMap((r) => [k.runCounters(org, r), k.runFailures(org, r)]),
      ...this.#indexKeys(org),
    ];
    const reply = (await OUTCOME_SCRIPTS.run(this.redis, 'cancel-learners', keys, [
      a.dryRun ? '1' : '0',
      Math.round(a.now ?? Date.now()),
      FAILURE,
      INDEXED,
      a.who,
      Math.max(0, Math.round(a.leaseGraceMs)),
      a.runIds.join(' '),
      ...learnerIds.map(String),
    ])) as unknown[];
    return reply.map((v): CancelDecision => {
      const text = String(v);
      if (text.startsWith('cancelled:')) return { kind: 'cancelled', runId: text.slice(10) };
      if (text === 'in-flight' || text === 'none') return { kind: text };
      if (text.startsWith('run:')) return { kind: 'run', runId: text.slice(4) };
      return { kind: 'state', bucket: text.slice(6) as Bucket };
    });
  }

  /** Compacts final records an earlier release wrote whole (state version 5); returns how many. */
  async compactRecords(org: string, learnerIds: readonly number[]): Promise<number> {
    if (learnerIds.length === 0) return 0;
    const k = this.keys;
    const keys = [k.outcomes(org), k.audit(org), k.auditIds(org)];
    return Number(await OUTCOME_SCRIPTS.run(this.redis, 'compact-records', keys, learnerIds.map(String)));
  }

  /** Records an outcome no call produced (BullMQ failed the job, claimed elsewhere). */
  async recordAttempt(
    org: string,
    learnerId: number,
    runId: string,
    update: AttemptUpdate,
    now = Date.now(),
  ): Promise<FinishResult> {
    return this.finish({
      org,
      learnerId,
      runId,
      at: now,
      attemptId: randomUUID(),
      update: {
        b: update.bucket,
        c: update.code,
        s: update.status,
        e: update.error,
        m: update.message,
        k: update.tokenId,
        x: update.transferId,
        d: update.durationMs,
        n: update.countsAsAttempt ? 1 : 0,
      },
    });
  }

  /**
   * The end of an attempt in one atomic step (finish-attempt.lua): the response's audit entry, the record
   * merged from its current state, the permit settled, the lease freed. Idempotent for the same args.
   */
  async finish(a: FinishArgs): Promise<FinishResult> {
    const k = this.keys;
    const { org } = a;
    const tokenId = a.permit?.tokenId ?? '_';
    const keys = [
      k.outcomes(org),
      k.runCounters(org, a.runId),
      k.orgCounts(org),
      k.audit(org),
      k.auditIds(org),
      k.lease(org),
      k.tokenLog(org, tokenId),
      k.tokenInflight(org, tokenId),
      k.orgLog(org),
      k.orgInflight(org),
      k.runFailures(org, a.runId),
      ...this.#indexKeys(org),
    ];
    const reply = (await OUTCOME_SCRIPTS.run(this.redis, 'finish-attempt', keys, [
      String(a.learnerId),
      a.runId,
      Math.round(a.at),
      a.attemptId,
      a.update ? JSON.stringify(a.update) : '',
      INDEXED,
      a.permit?.mode ?? '',
      a.permit?.permitId ?? '',
      a.permit?.tokenKeyTtlMs ?? 0,
      a.permit?.orgKeyTtlMs ?? 0,
      a.holder ?? '',
      a.audit?.key ?? '',
      a.audit?.transferId ?? '',
      a.audit?.raw ?? '',
      a.audit?.kind ?? '',
      k.limiterEvents(org),
      JSON.stringify({ event: 'release', org, tokenId: a.permit?.tokenId ?? null }),
      SUCCESS,
      a.audit?.reason ?? '',
      FAILURE,
      a.audit?.body ? String(a.audit.body.bytes) : '',
      a.audit?.body?.sha256 ?? '',
    ])) as unknown[];
    const [auditId, bucket, replayed, pr] = reply.map((v) => String(v));
    // After the write, so an archiver that unmarked the organization meanwhile is told again. Not
    // awaited: a mark lost here is found by the archiver's sweep at start.
    if (auditId || (replayed !== '1' && isFinalBucket(bucket as Bucket))) this.#markUnarchived(org);
    return {
      auditId: auditId ? auditId : undefined,
      bucket: bucket as Bucket,
      replayed: replayed === '1',
      possibleRepeat: pr === '1',
    };
  }

  /**
   * Writes in the new organization's audit stream that a learner was moved here from another
   * organization on purpose: the next transfer of it is wanted, not a double.
   */
  async appendClaimMove(
    org: string,
    learnerId: number,
    runId: string,
    from: string,
    by: string,
  ): Promise<string> {
    const raw = JSON.stringify({ claimMoved: { from, to: org, by, at: new Date().toISOString() } });
    const id = await this.redis.xadd(
      this.keys.audit(org),
      '*',
      'learnerId',
      String(learnerId),
      'runId',
      runId,
      'transferId',
      '',
      'kind',
      'claim-move',
      'at',
      String(Date.now()),
      'raw',
      raw,
    );
    this.#markUnarchived(org);
    return id ?? '';
  }

  /** The audit streams as the archive reads and trims them. */
  auditStream(): AuditStream {
    return this.#stream;
  }

  #markUnarchived(org: string): void {
    this.#stream.markUnarchived(org).catch(() => undefined);
  }
}
