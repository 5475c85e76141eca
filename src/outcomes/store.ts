// The outcome store: where every learner stands, per organization, in Redis. The worker writes it, the
// producer seeds it (`queued`), and reports, status, retry and the dashboard read it.
import { readFileSync } from 'node:fs';
import type { Redis, ChainableCommander } from 'ioredis';
import type { TransferResult } from '../api/schemas.ts';
import type { Keys } from '../keys.ts';
import {
  BUCKETS,
  MAX_HISTORY,
  decodeRecord,
  isIndexedBucket,
  type Bucket,
  type OutcomeRecord,
} from './record.ts';

const SCRIPT = readFileSync(new URL('./record-outcome.lua', import.meta.url), 'utf8');
const INDEXED = BUCKETS.filter(isIndexedBucket).join(' ');

type RecordCommand = (
  outKey: string,
  runKey: string,
  countsKey: string,
  runId: string,
  now: number,
  idxPrefix: string,
  indexed: string,
  mode: string,
  force: string,
  ...triples: string[]
) => Promise<string[]>;

interface WithRecordCommand {
  ltRecordOutcome: RecordCommand;
}

export interface QueueMark {
  org: string;
  learnerId: number;
  runId: string;
  source: string;
  /**
   * Re-open a learner whose record is final (retry, reconcile): true for any final record, or a time
   * (ms): only records last updated before it (a reconcile passes the start of its walk, so a learner a
   * worker moved after its page was read is not transferred again).
   */
  force: boolean | number;
}

/** What marking a learner queued found: new, re-opened, or kept (with the bucket it was in). */
export type MarkResult =
  { kind: 'new' } | { kind: 'reopened'; from: Bucket } | { kind: 'kept'; bucket: Bucket };

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

export type RunCounts = Partial<Record<Bucket | 'total', number>>;

export class OutcomeStore {
  readonly #redis: Redis & WithRecordCommand;
  readonly #keys: Keys;

  constructor(redis: Redis, keys: Keys) {
    if (!(redis as Partial<WithRecordCommand>).ltRecordOutcome) {
      redis.defineCommand('ltRecordOutcome', { numberOfKeys: 3, lua: SCRIPT });
    }
    this.#redis = redis as Redis & WithRecordCommand;
    this.#keys = keys;
  }

  /** One script call for records of one organization and one run (a batch, or a single attempt). */
  #call(
    target: Redis | ChainableCommander,
    org: string,
    runId: string,
    now: number,
    records: readonly { learnerId: number; record: OutcomeRecord }[],
    mode: 'set' | 'enqueue',
    force: boolean | number,
  ) {
    const k = this.#keys;
    const triples: string[] = [];
    for (const { learnerId, record } of records)
      triples.push(String(learnerId), JSON.stringify(record), record.b);
    return (target as unknown as WithRecordCommand).ltRecordOutcome(
      k.outcomes(org),
      k.runCounters(org, runId),
      k.orgCounts(org),
      runId,
      now,
      k.outcomeIndexPrefix(org),
      INDEXED,
      mode,
      String(force === true ? Number.MAX_SAFE_INTEGER : force === false ? 0 : force),
      ...triples,
    );
  }

  /** Marks a batch of learners `queued` in one round trip; final records are kept unless forced. */
  async markQueued(items: readonly QueueMark[], now = Date.now()): Promise<MarkResult[]> {
    if (items.length === 0) return [];
    // One script call per (organization, run, force) group, in one round trip.
    const groups = new Map<string, { org: string; runId: string; force: boolean | number; at: number[] }>();
    items.forEach((it, i) => {
      const key = `${it.org}\u0000${it.runId}\u0000${String(it.force)}`;
      let g = groups.get(key);
      if (!g) groups.set(key, (g = { org: it.org, runId: it.runId, force: it.force, at: [] }));
      g.at.push(i);
    });
    const pipe = this.#redis.pipeline();
    for (const g of groups.values()) {
      const records = g.at.map((i) => {
        const it = items[i] as QueueMark;
        const record: OutcomeRecord = { b: 'queued', r: it.runId, q: now, t: now, src: it.source, a: 0 };
        return { learnerId: it.learnerId, record };
      });
      this.#call(pipe, g.org, g.runId, now, records, 'enqueue', g.force);
    }
    const replies = (await pipe.exec()) ?? [];
    const out: MarkResult[] = new Array(items.length);
    [...groups.values()].forEach((g, gi) => {
      const [err, reply] = replies[gi] ?? [new Error('no reply'), null];
      if (err) throw err;
      const texts = reply as string[];
      g.at.forEach((i, j) => {
        const text = String(texts[j] ?? '');
        out[i] =
          text === ''
            ? { kind: 'new' }
            : text.startsWith('skip:')
              ? { kind: 'kept', bucket: text.slice(5) as Bucket }
              : { kind: 'reopened', from: text as Bucket };
      });
    });
    return out;
  }

  async get(org: string, learnerId: number): Promise<OutcomeRecord | undefined> {
    return decodeRecord(await this.#redis.hget(this.#keys.outcomes(org), String(learnerId)));
  }

  async getMany(org: string, learnerIds: readonly number[]): Promise<(OutcomeRecord | undefined)[]> {
    if (learnerIds.length === 0) return [];
    const texts = await this.#redis.hmget(this.#keys.outcomes(org), ...learnerIds.map(String));
    return texts.map((t) => decodeRecord(t));
  }

  /**
   * Records the outcome of one attempt (or a wait). Only the job that holds the learner writes here,
   * so read-modify-write is safe; the script keeps indexes and counters consistent with the record.
   */
  async recordAttempt(
    org: string,
    learnerId: number,
    runId: string,
    update: AttemptUpdate,
    now = Date.now(),
    /** The record the caller read at the start of the job (saves reading it again). */
    known?: { previous: OutcomeRecord | undefined },
  ): Promise<OutcomeRecord> {
    const old = known ? known.previous : await this.get(org, learnerId);
    const history = [
      ...(old?.h ?? []),
      [now, update.code, update.status ?? 0, update.durationMs] as [number, string, number, number],
    ];
    const record: OutcomeRecord = {
      b: update.bucket,
      r: runId,
      q: old?.q ?? now,
      t: now,
      ...(old?.src !== undefined ? { src: old.src } : {}),
      c: update.code,
      ...(update.status !== undefined ? { s: update.status } : {}),
      ...(update.error !== undefined ? { e: update.error } : {}),
      ...(update.message !== undefined ? { m: update.message } : {}),
      a: (old?.a ?? 0) + (update.countsAsAttempt ? 1 : 0),
      ...((update.transferId ?? old?.x) !== undefined ? { x: update.transferId ?? old?.x } : {}),
      ...(update.tokenId !== undefined ? { k: update.tokenId } : {}),
      ...(old?.au || update.auditId
        ? { au: [...(old?.au ?? []), ...(update.auditId ? [update.auditId] : [])].slice(-MAX_HISTORY) }
        : {}),
      h: history.slice(-MAX_HISTORY),
    };
    await this.#call(this.#redis, org, runId, now, [{ learnerId, record }], 'set', false);
    return record;
  }

  /** Appends a successful transfer's full result: the only record of the authorizations it deleted. */
  async appendAudit(org: string, learnerId: number, runId: string, result: TransferResult): Promise<string> {
    return this.#addAudit(org, learnerId, runId, result.data.transferDetails.transferId, result.data);
  }

  /**
   * Appends the text of a 200 that could not be read as a transfer result (cut, or off the schema): the
   * transfer may have happened, and this text is all that is left of what it deleted.
   */
  async appendUnreadableAudit(
    org: string,
    learnerId: number,
    runId: string,
    body: string,
    reason: string,
  ): Promise<string> {
    return this.#addAudit(org, learnerId, runId, '', { unreadable: true, reason, body });
  }

  async #addAudit(
    org: string,
    learnerId: number,
    runId: string,
    transferId: string,
    result: unknown,
  ): Promise<string> {
    const id = await this.#redis.xadd(
      this.#keys.audit(org),
      '*',
      'learnerId',
      String(learnerId),
      'runId',
      runId,
      'transferId',
      transferId,
      'result',
      JSON.stringify(result),
    );
    return id ?? '';
  }

  /** Audit entries by their stream ids (a record keeps the ids of its learner's entries). */
  async auditEntries(org: string, ids: readonly string[]): Promise<AuditEntry[]> {
    const out: AuditEntry[] = [];
    for (const id of ids) {
      const [entry] = await this.#redis.xrange(this.#keys.audit(org), id, id);
      if (entry) out.push(toAuditEntry(entry[0], entry[1]));
    }
    return out;
  }

  /** Iterates the audit stream of an organization in order. */
  async *audit(org: string): AsyncGenerator<AuditEntry> {
    let start = '-';
    for (;;) {
      const batch = await this.#redis.xrange(this.#keys.audit(org), start, '+', 'COUNT', 1000);
      for (const [id, fields] of batch) yield toAuditEntry(id, fields);
      if (batch.length < 1000) return;
      start = `(${batch[batch.length - 1]?.[0]}`;
    }
  }

  async runCounts(org: string, runId: string): Promise<RunCounts> {
    const raw = await this.#redis.hgetall(this.#keys.runCounters(org, runId));
    const out: RunCounts = {};
    for (const [k, v] of Object.entries(raw)) {
      const n = Number(v);
      if (n !== 0) out[k as Bucket] = n;
    }
    return out;
  }

  /** Learners of an organization per bucket (every run). */
  async orgCounts(org: string): Promise<RunCounts> {
    const raw = await this.#redis.hgetall(this.#keys.orgCounts(org));
    const out: RunCounts = {};
    for (const [k, v] of Object.entries(raw)) if (Number(v) !== 0) out[k as Bucket] = Number(v);
    return out;
  }

  /** Count of learners in an indexed bucket. */
  async bucketSize(org: string, bucket: Bucket): Promise<number> {
    return this.#redis.zcard(this.#keys.outcomeIndex(org, bucket));
  }

  /** Learner ids of an indexed bucket, newest first, for paging. */
  async bucketPage(org: string, bucket: Bucket, offset: number, limit: number): Promise<number[]> {
    const ids = await this.#redis.zrevrange(this.#keys.outcomeIndex(org, bucket), offset, offset + limit - 1);
    return ids.map(Number);
  }

  /** Every record of an organization, in batches (HSCAN: constant memory on the server and here). */
  async *scan(org: string, count = 1000): AsyncGenerator<[number, OutcomeRecord]> {
    let cursor = '0';
    do {
      const [next, flat] = await this.#redis.hscan(this.#keys.outcomes(org), cursor, 'COUNT', count);
      cursor = next;
      for (let i = 0; i + 1 < flat.length; i += 2) {
        const record = decodeRecord(flat[i + 1]);
        if (record) yield [Number(flat[i]), record];
      }
    } while (cursor !== '0');
  }

  async size(org: string): Promise<number> {
    return this.#redis.hlen(this.#keys.outcomes(org));
  }
}

export interface AuditEntry {
  id: string;
  learnerId: number;
  runId: string;
  transferId: string;
  /** The `data` of the transfer result: groups removed and added, authorizations revoked, assessments. */
  result: unknown;
}

function toAuditEntry(id: string, fields: string[]): AuditEntry {
  const f: Record<string, string> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) f[fields[i] as string] = fields[i + 1] as string;
  return {
    id,
    learnerId: Number(f.learnerId),
    runId: f.runId ?? '',
    transferId: f.transferId ?? '',
    result: JSON.parse(f.result ?? 'null'),
  };
}
