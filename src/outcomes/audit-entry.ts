// An audit entry (stream or archive) as the outcome store reads it, in every format a release wrote.
import { parseRepeatCauses, type RepeatCause } from './repeat-causes.ts';
import { recordStoryOf } from './story.ts';

export interface AuditEntry {
  id: string;
  learnerId: number;
  runId: string;
  transferId: string;
  /**
   * The `data` of the transfer result (groups removed and added, authorizations revoked, assessments),
   * or, for a body that could not be read, `{ unreadable: true, reason, body }`.
   */
  result: unknown;
  /** The body as the service sent it (entries written before it was kept verbatim: undefined). */
  raw: string | undefined;
  /** 'possible-repeat': a 400 "already associated" after a lost answer (no body; see repeatCauses). */
  kind: 'transfer' | 'unreadable' | 'unexpected' | 'claim-move' | 'possible-repeat' | 'record';
  /** A repeat of a transfer whose own answer was lost. */
  possibleRepeat: boolean;
  /** Why, on a flagged entry (empty when the release that flagged it kept no cause). */
  repeatCauses?: RepeatCause[];
  /** Personal data removed from this entry: when, why and which fields (ops/audit/redact.ts). */
  personalRemoved?: unknown[];
}

const AUDIT_KINDS: ReadonlySet<string> = new Set([
  'unreadable',
  'unexpected',
  'claim-move',
  'possible-repeat',
  'record',
]);

/** The removals of personal data an entry lists (ops/audit/redact.ts writes them). */
function removalsOf(value: string): unknown[] {
  try {
    const v = JSON.parse(value) as unknown;
    return Array.isArray(v) ? v : [];
  } catch {
    return [];
  }
}

/** An entry of the stream or the archive as the outcome store reads it. */
export function toAuditEntry(id: string, fields: string[]): AuditEntry {
  const f: Record<string, string> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) f[fields[i] as string] = fields[i + 1] as string;
  const base = {
    id,
    learnerId: Number(f.learnerId),
    runId: f.runId ?? '',
    transferId: f.transferId ?? '',
    possibleRepeat: f.possibleRepeat === '1',
    ...(f.possibleRepeat === '1' ? { repeatCauses: parseRepeatCauses(f.repeatCause) } : {}),
    ...(f.personalRemoved !== undefined ? { personalRemoved: removalsOf(f.personalRemoved) } : {}),
  };
  if (f.raw === undefined) {
    // Written by the release before the verbatim audit: `result` holds the parsed data (or the
    // { unreadable, reason, body } of a body that could not be read).
    const result: unknown = JSON.parse(f.result ?? 'null');
    const unreadable = typeof result === 'object' && result !== null && 'unreadable' in result;
    return { ...base, result, raw: undefined, kind: unreadable ? 'unreadable' : 'transfer' };
  }
  const kind = (AUDIT_KINDS.has(f.kind ?? '') ? f.kind : 'transfer') as AuditEntry['kind'];
  if (kind === 'claim-move') return { ...base, result: JSON.parse(f.raw) as unknown, raw: f.raw, kind };
  if (kind === 'possible-repeat') return { ...base, result: null, raw: undefined, kind };
  if (kind === 'record') return { ...base, result: recordStoryOf(f), raw: undefined, kind };
  let data: unknown;
  if (kind !== 'unreadable') {
    try {
      data = (JSON.parse(f.raw) as { data?: unknown }).data;
    } catch {
      data = undefined;
    }
  }
  if (data !== undefined) return { ...base, result: data, raw: f.raw, kind };
  // An unreadable body: what is kept of it (its prefix, and since the bounded audit its length and hash;
  // a learner's repeat of the same body names the entry that keeps its prefix).
  const result = {
    unreadable: true,
    reason: f.reason ?? 'not JSON',
    body: f.raw,
    ...(f.bodySha256 !== undefined
      ? {
          bodyBytes: Number(f.bodyBytes),
          bodySha256: f.bodySha256,
          prefixOnly: Number(f.bodyBytes) > Buffer.byteLength(f.raw),
        }
      : {}),
    ...(f.sameBodyAs !== undefined ? { sameBodyAs: f.sameBodyAs } : {}),
  };
  return { ...base, result, raw: f.sameBodyAs !== undefined ? undefined : f.raw, kind };
}
