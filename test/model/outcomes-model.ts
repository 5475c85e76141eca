// The model the outcome store is checked against, written from the rules in finish-attempt.lua's header and
// acquire.lua's "Lease" paragraph, not from their code: what each learner's record must be after the
// finish calls that reached Redis (in the order they reached it), which audit entries must exist, who
// holds each learner's lease, and what the service did to each learner. Plain data, no Redis, no vitest.
import { isFinalBucket, isSuccessBucket, type Bucket } from '../../src/outcomes/record.ts';
import type { FinishArgs } from '../../src/outcomes/store.ts';

/** One learner's record as the rules make it (only what the rules decide; the rest is bookkeeping). */
export interface ModelRecord {
  bucket: Bucket;
  runId: string;
  /** Attempts that counted (sum of `n` of every merged attempt). */
  attempts: number;
  transferId: string | undefined;
  possibleRepeat: boolean;
  /** An attempt merged here had taken the lease over from a holder that died mid-call. */
  lostLease: boolean;
  /** Every attempt merged, in merge order (a replay of one of them merges nothing). */
  merged: string[];
  /** Outcome code of every merged attempt, in merge order. */
  codes: string[];
  /** Audit keys of the entries this record points to, in the order they were first pointed to. */
  audit: string[];
  /** A final record is compacted: its audit ids and history went to a story entry of the stream. */
  compacted: boolean;
}

/** A learner's record before any attempt was merged into it. */
function freshRecord(bucket: Bucket, runId: string): ModelRecord {
  return {
    bucket,
    runId,
    attempts: 0,
    transferId: undefined,
    possibleRepeat: false,
    lostLease: false,
    merged: [],
    codes: [],
    audit: [],
    compacted: false,
  };
}

export interface ModelAuditEntry {
  key: string;
  learnerId: number;
  transferId: string;
  kind: string;
  possibleRepeat: boolean;
}

/** What the service did to a learner that moved it (a transfer), and whether its body was delivered. */
export interface Effect {
  learnerId: number;
  transferId: string;
  revoked: string[];
  /** The 200 with its whole body reached the worker (and so its spool). */
  delivered: boolean;
}

export interface LeaseState {
  holder: string;
  deadline: number;
  contested: number;
}

/** What acquire.lua's lease must answer for `holder` at Redis time `now`. */
export type LeaseVerdict =
  { ok: true; tookOver: boolean } | { ok: false; waitMs: number; mark?: number | undefined };

export class OutcomesModel {
  readonly records = new Map<number, ModelRecord>();
  /** Audit entries by their dedupe key, in the order they were written. */
  readonly audit = new Map<string, ModelAuditEntry>();
  /** Dedupe keys Redis must still hold: those of learners not compacted since their entry was written. */
  readonly dedupe = new Set<string>();
  /** Story entries (kind 'record') written: one per compaction. */
  stories = 0;
  readonly leases = new Map<number, LeaseState>();
  readonly effects: Effect[] = [];
  /** Learners the service has moved into the organization. */
  readonly inOrg = new Set<number>();
  /** Learners with a BullMQ job (the repair sweep's concern). */
  readonly jobs = new Set<number>();
  /** Holders whose lease another attempt took over: their call ended at their deadline, before it. */
  readonly overtaken = new Set<string>();

  constructor(
    readonly learners: readonly number[],
    readonly leaseTtlMs: number,
    readonly graceMs: number,
  ) {}

  /** A learner marked queued by the producer (no record before). */
  queued(learnerId: number, runId: string): void {
    this.records.set(learnerId, freshRecord('queued', runId));
  }

  /** acquire.lua's lease rule for one ask; updates the lease as the script must. */
  acquire(learnerId: number, holder: string, now: number): LeaseVerdict {
    const lease = this.leases.get(learnerId);
    const grant = (tookOver: boolean): LeaseVerdict => {
      this.leases.set(learnerId, { holder, deadline: now + this.leaseTtlMs, contested: 0 });
      return { ok: true, tookOver };
    };
    if (!lease || lease.holder === holder) return grant(false);
    if (now < lease.deadline) return { ok: false, waitMs: lease.deadline - now };
    if (lease.contested === 0) {
      lease.contested = now;
      return { ok: false, waitMs: Math.max(1, this.graceMs), mark: now };
    }
    if (now < lease.contested + this.graceMs)
      return { ok: false, waitMs: lease.contested + this.graceMs - now };
    this.overtaken.add(lease.holder);
    return grant(true);
  }

  /**
   * One finish call reaching Redis: what finish-attempt.lua must return, with the record, the audit and
   * the lease updated as its header says.
   */
  finish(a: FinishArgs): { bucket: Bucket | ''; replayed: boolean; possibleRepeat: boolean } {
    const old = this.records.get(a.learnerId);
    const u = a.update;
    const replayed = old !== undefined && old.merged.includes(a.attemptId);

    // A repeat of a learner never recorded transferred, after an attempt whose answer was lost.
    let possibleRepeat = false;
    if (u?.b === 'already-in-org') {
      if (old && old.transferId === undefined && old.bucket !== 'transferred') {
        possibleRepeat =
          u.lost === 1 ||
          old.lostLease ||
          old.codes.some((c) => c === 'network-error' || c === 'bad-response');
      } else if (!old) possibleRepeat = u.lost === 1;
    }

    // The response, once per dedupe key; a possible repeat without a body gets an entry of its own.
    let auditKey = a.audit?.key ?? '';
    let kind = a.audit?.kind ?? '';
    let transferId = a.audit?.transferId ?? '';
    if (auditKey === '' && possibleRepeat) {
      auditKey = `r:${a.attemptId}`;
      kind = 'possible-repeat';
      transferId = '';
    }
    if (auditKey !== '' && !this.audit.has(auditKey)) {
      this.audit.set(auditKey, { key: auditKey, learnerId: a.learnerId, transferId, kind, possibleRepeat });
      this.dedupe.add(auditKey);
    }

    // The record, merged from its current state.
    let bucket: Bucket | '' = old?.bucket ?? '';
    if (!replayed && u) {
      const rec: ModelRecord = old ?? freshRecord(u.b, a.runId);
      const oldBucket = old?.bucket;
      let next: Bucket = u.b;
      let kept = false;
      // A success is never replaced by a failure; 'transferred' never by 'already-in-org'.
      if (oldBucket && isSuccessBucket(oldBucket) && !isSuccessBucket(next)) [next, kept] = [oldBucket, true];
      if (oldBucket === 'transferred' && next === 'already-in-org') [next, kept] = ['transferred', true];
      if (!kept) rec.runId = a.runId;
      rec.bucket = next;
      rec.attempts += u.n;
      // The effective transfer's id: a transfer's own id wins; nothing else replaces a transfer's.
      if (
        u.x &&
        (rec.transferId === undefined || u.b === 'transferred') &&
        !(oldBucket === 'transferred' && u.b !== 'transferred')
      )
        rec.transferId = u.x;
      if (possibleRepeat) rec.possibleRepeat = true;
      if (u.lost === 1) rec.lostLease = true;
      // The transfer's own answer is on record: nothing is unknown any more.
      if (u.b === 'transferred') [rec.possibleRepeat, rec.lostLease] = [false, false];
      if (auditKey !== '' && !rec.audit.includes(auditKey)) rec.audit.push(auditKey);
      rec.merged.push(a.attemptId);
      rec.codes.push(u.c);
      // Final: compacted (its story to the stream, its dedupe keys dropped; replays are known by `ai`).
      if (isFinalBucket(next)) {
        for (const k of rec.audit.slice(-10)) this.dedupe.delete(k);
        rec.audit = [];
        rec.compacted = true;
        this.stories++;
      }
      this.records.set(a.learnerId, rec);
      bucket = next;
    }

    // The lease, if this attempt still holds it.
    if (a.holder && this.leases.get(a.learnerId)?.holder === a.holder) this.leases.delete(a.learnerId);
    return { bucket, replayed, possibleRepeat };
  }

  /** Learners per bucket, as the organization's (and the one run's) counters must say. */
  tally(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const r of this.records.values()) out[r.bucket] = (out[r.bucket] ?? 0) + 1;
    return out;
  }
}
