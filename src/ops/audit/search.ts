// Reading the audit wherever it is, the archive files then the stream, each entry once: the stream holds
// nothing at or before the archive's cursor (audit-commit.lua), and an archived entry after it is an
// unconfirmed write, read from the stream instead.
import { compareIds, idTime, type AuditStream } from '../../outcomes/audit-stream.ts';
import { toAuditEntry, type AuditEntry } from '../../outcomes/audit-entry.ts';
import { repeatReason } from '../../outcomes/repeat-causes.ts';
import { archivedDays, dayFile, dayOf, dayOfMs, readDayFile, sizeOf } from './archive-file.ts';

export interface AuditFilter {
  orgs: readonly string[];
  runId?: string | undefined;
  learnerId?: number | undefined;
  /** Entries Redis wrote at or after this time (ms). */
  sinceMs?: number | undefined;
  /** Entries Redis wrote at or before this time (ms). */
  untilMs?: number | undefined;
}

export interface AuditSources {
  stream: AuditStream;
  /** The archive to read first (AUDIT_ARCHIVE_DIR or --archive); none: the stream alone. */
  archiveDir?: string | undefined;
}

/** An entry found, with where it came from. */
export interface FoundAuditEntry {
  org: string;
  entry: AuditEntry;
  /** The archive file it was read from; undefined: the stream. */
  file?: string | undefined;
}

const BATCH = 1000;

const flat = (fields: Record<string, string>): string[] => Object.entries(fields).flat();

function matches(f: AuditFilter, e: AuditEntry): boolean {
  if (f.runId && e.runId !== f.runId) return false;
  if (f.learnerId !== undefined && e.learnerId !== f.learnerId) return false;
  const at = idTime(e.id);
  if (f.sinceMs !== undefined && at < f.sinceMs) return false;
  if (f.untilMs !== undefined && at > f.untilMs) return false;
  return true;
}

const dayOfMaybe = (ms: number | undefined) => (ms === undefined ? undefined : dayOfMs(ms));

/**
 * Every matching entry of each organization, oldest first: the archive's, then the stream's up to `upto`
 * (per organization; default: the newest). `onStreamEntry` sees every stream entry read, matching or not.
 */
export async function* searchAudit(
  src: AuditSources,
  filter: AuditFilter,
  options: { upto?: ReadonlyMap<string, string>; onStreamEntry?: (org: string, id: string) => void } = {},
): AsyncGenerator<FoundAuditEntry> {
  for (const org of filter.orgs) {
    const { last: cursor } = await src.stream.state(org);
    // The last archived id read: the files hold ids in order, so a line not after it is one written twice
    // (by a process that stalled past its lease: docs/audit-archive.md), read once.
    let archived = '';
    if (src.archiveDir) {
      const range = { since: dayOfMaybe(filter.sinceMs), until: dayOfMaybe(filter.untilMs) };
      for (const day of await archivedDays(src.archiveDir, org, range)) {
        const file = dayFile(src.archiveDir, org, day);
        for await (const line of readDayFile(file)) {
          // Not confirmed yet: still in the stream, read there.
          if (cursor && compareIds(line.auditId, cursor) > 0) continue;
          if (archived && compareIds(line.auditId, archived) <= 0) continue;
          archived = line.auditId;
          const entry = toAuditEntry(line.auditId, flat(line.fields));
          if (matches(filter, entry)) yield { org, entry, file };
        }
      }
    }
    const upto = options.upto?.get(org) ?? '+';
    if (upto === '') continue;
    // Archived lines after the cursor were skipped: the cursor, when there is one, is the furthest.
    let after = cursor || archived;
    for (;;) {
      const batch = await src.stream.read(org, after, upto, BATCH);
      for (const raw of batch) {
        options.onStreamEntry?.(org, raw.id);
        const entry = toAuditEntry(raw.id, flat(raw.fields));
        if (matches(filter, entry)) yield { org, entry };
      }
      if (batch.length < BATCH) break;
      after = (batch[batch.length - 1] as { id: string }).id;
    }
  }
}

/** One line of `audit` (NDJSON): what an auditor reads alone. */
export function auditLine(org: string, e: AuditEntry): Record<string, unknown> {
  return {
    org,
    learnerId: e.learnerId,
    runId: e.runId,
    transferId: e.transferId || null,
    // The stream id starts with the time Redis wrote the entry (ms).
    recordedAt: new Date(idTime(e.id)).toISOString(),
    auditId: e.id,
    kind: e.kind,
    // A file read alone must say which transfers' revoked authorizations are unknown, and why.
    ...(e.possibleRepeat
      ? { possibleRepeat: true, possibleRepeatReason: repeatReason(e.repeatCauses ?? []) }
      : {}),
    ...(e.personalRemoved ? { personalDataRemoved: e.personalRemoved } : {}),
    result: e.result,
  };
}

export interface EntriesById {
  /** Found, in the order of the ids; `file` set for those read from the archive. */
  found: FoundAuditEntry[];
  /** Ids found nowhere: trimmed from Redis, and not in the archive read here. */
  missing: string[];
}

/**
 * The entries a learner's record names (its `au` ids): from the stream, and those trimmed from it from
 * the archive (the day file its id names: one file read per day, not a search).
 */
export async function auditEntriesById(
  src: AuditSources & { read: (org: string, ids: readonly string[]) => Promise<AuditEntry[]> },
  org: string,
  ids: readonly string[],
): Promise<EntriesById> {
  const inStream = new Map((await src.read(org, ids)).map((e) => [e.id, e]));
  const fromArchive = new Map<string, FoundAuditEntry>();
  const wanted = new Set(ids.filter((id) => !inStream.has(id)));
  if (src.archiveDir && wanted.size > 0) {
    for (const day of new Set([...wanted].map(dayOf))) {
      const file = dayFile(src.archiveDir, org, day);
      if ((await sizeOf(file)) === 0) continue;
      for await (const line of readDayFile(file)) {
        if (wanted.has(line.auditId) && !fromArchive.has(line.auditId)) {
          fromArchive.set(line.auditId, { org, entry: toAuditEntry(line.auditId, flat(line.fields)), file });
        }
      }
    }
  }
  const found: FoundAuditEntry[] = [];
  const missing: string[] = [];
  for (const id of ids) {
    const s = inStream.get(id);
    const a = fromArchive.get(id);
    if (s) found.push({ org, entry: s });
    else if (a) found.push(a);
    else missing.push(id);
  }
  return { found, missing };
}
