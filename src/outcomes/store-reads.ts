// The reads of the outcome store (store.ts holds the writes).
import type { Keys } from '../core/keys.ts';
import type { RedisClient } from '../redis/client.ts';
import { toAuditEntry, type AuditEntry } from './audit-entry.ts';
import { decodeRecord, type Bucket, type OutcomeRecord } from './record.ts';
import { withStory, type StoryReader } from './story.ts';

export type RunCounts = Partial<Record<Bucket | 'total', number>>;

export class OutcomeReader {
  constructor(
    protected readonly redis: RedisClient,
    protected readonly keys: Keys,
  ) {}

  async get(org: string, learnerId: number): Promise<OutcomeRecord | undefined> {
    return decodeRecord(await this.redis.hget(this.keys.outcomes(org), String(learnerId)));
  }

  /**
   * The record with its history and audit ids, read back from the stream when it was compacted (the
   * learner page); `archived`: part of it is only in the archive files now.
   */
  async getWithStory(
    org: string,
    learnerId: number,
    fromArchive?: StoryReader,
  ): Promise<{ record: OutcomeRecord; archived: boolean } | undefined> {
    const record = await this.get(org, learnerId);
    return record ? withStory(this.redis, this.keys.audit(org), record, fromArchive) : undefined;
  }

  async getMany(org: string, learnerIds: readonly number[]): Promise<(OutcomeRecord | undefined)[]> {
    if (learnerIds.length === 0) return [];
    const texts = await this.redis.hmget(this.keys.outcomes(org), ...learnerIds.map(String));
    return texts.map((t) => decodeRecord(t));
  }

  /** Audit entries by their stream ids (a record keeps the ids of its learner's entries). */
  async auditEntries(org: string, ids: readonly string[]): Promise<AuditEntry[]> {
    const out: AuditEntry[] = [];
    for (const id of ids) {
      const [entry] = await this.redis.xrange(this.keys.audit(org), id, id);
      if (entry) out.push(toAuditEntry(entry[0], entry[1]));
    }
    return out;
  }

  /** Iterates the audit stream of an organization in order. */
  async *audit(org: string): AsyncGenerator<AuditEntry> {
    let start = '-';
    for (;;) {
      const batch = await this.redis.xrange(this.keys.audit(org), start, '+', 'COUNT', 1000);
      for (const [id, fields] of batch) yield toAuditEntry(id, fields);
      if (batch.length < 1000) return;
      start = `(${batch[batch.length - 1]?.[0]}`;
    }
  }

  async runCounts(org: string, runId: string): Promise<RunCounts> {
    const raw = await this.redis.hgetall(this.keys.runCounters(org, runId));
    const out: RunCounts = {};
    for (const [k, v] of Object.entries(raw)) {
      const n = Number(v);
      if (n !== 0) out[k as Bucket] = n;
    }
    return out;
  }

  /** Learners of an organization per bucket (every run). */
  async orgCounts(org: string): Promise<RunCounts> {
    const raw = await this.redis.hgetall(this.keys.orgCounts(org));
    const out: RunCounts = {};
    for (const [k, v] of Object.entries(raw)) if (Number(v) !== 0) out[k as Bucket] = Number(v);
    return out;
  }

  /** Count of learners in an indexed bucket. */
  async bucketSize(org: string, bucket: Bucket): Promise<number> {
    return this.redis.zcard(this.keys.outcomeIndex(org, bucket));
  }

  /** Learner ids of an indexed bucket, newest first, for paging. */
  async bucketPage(org: string, bucket: Bucket, offset: number, limit: number): Promise<number[]> {
    const ids = await this.redis.zrevrange(this.keys.outcomeIndex(org, bucket), offset, offset + limit - 1);
    return ids.map(Number);
  }

  /** Count of a run's failed learners in an organization. */
  async runFailureSize(org: string, runId: string): Promise<number> {
    return this.redis.zcard(this.keys.runFailures(org, runId));
  }

  /** Learner ids of a run's failures in an organization, newest first, for paging. */
  async runFailurePage(org: string, runId: string, offset: number, limit: number): Promise<number[]> {
    const ids = await this.redis.zrevrange(this.keys.runFailures(org, runId), offset, offset + limit - 1);
    return ids.map(Number);
  }

  /** For each id, whether it is in an indexed bucket (one ZMSCORE, no record read). */
  async inBucket(org: string, bucket: Bucket, learnerIds: readonly number[]): Promise<boolean[]> {
    return this.#inSet(this.keys.outcomeIndex(org, bucket), learnerIds);
  }

  /** For each id, whether it is in a run's failure index (one ZMSCORE, no record read). */
  async inRunFailures(org: string, runId: string, learnerIds: readonly number[]): Promise<boolean[]> {
    return this.#inSet(this.keys.runFailures(org, runId), learnerIds);
  }

  async #inSet(key: string, learnerIds: readonly number[]): Promise<boolean[]> {
    if (learnerIds.length === 0) return [];
    const scores = await this.redis.zmscore(key, ...learnerIds.map(String));
    return scores.map((s) => s !== null);
  }

  /** Every record of an organization, in batches (HSCAN: constant memory). */
  async *scan(org: string, count = 1000): AsyncGenerator<[number, OutcomeRecord]> {
    let cursor = '0';
    do {
      const [next, flat] = await this.redis.hscan(this.keys.outcomes(org), cursor, 'COUNT', count);
      cursor = next;
      for (let i = 0; i + 1 < flat.length; i += 2) {
        const record = decodeRecord(flat[i + 1]);
        if (record) yield [Number(flat[i]), record];
      }
    } while (cursor !== '0');
  }

  async size(org: string): Promise<number> {
    return this.redis.hlen(this.keys.outcomes(org));
  }
}
