// report --reverse DIR: what moving a run (or an organization's learners) back would take: a CSV per
// previous organization for `enqueue --csv --move`, `regrant.csv`, and the learners listed apart
// (docs/undo.md). Every file is private: regrant.csv names people.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { AppContext } from '../../app/context.ts';
import { tokensOf } from '../../core/config.ts';
import { csvLine } from '../../core/csv-safe.ts';
import { LearnerTransferError } from '../../core/errors.ts';
import { assertPrivateTarget, PrivateOutput } from '../../core/private-file.ts';
import { AuditStream } from '../../outcomes/audit-stream.ts';
import { CANCELLED, isSuccessBucket, type Bucket, type OutcomeRecord } from '../../outcomes/record.ts';
import { repeatReason } from '../../outcomes/repeat-causes.ts';
import type { AuditEntry } from '../../outcomes/audit-entry.ts';
import { OrgIds } from '../../queue/org-ids.ts';
import { redactAuthorization } from '../audit/redact.ts';
import { searchAudit } from '../audit/search.ts';

export interface ReverseOptions {
  dir: string;
  /** The run to reverse (its organizations), or every learner of `orgs`. */
  runId?: string | undefined;
  orgs: readonly string[];
  /** The audit archive to read too (default: the config's AUDIT_ARCHIVE_DIR). */
  archiveDir?: string | undefined;
  /** --org-id KEY=N given now: with the ids remembered in Redis, what names a previous organization. */
  orgIds?: Readonly<Record<string, number>> | undefined;
  /** --redact: regrant.csv without the e-mail address and name of each authorization (exports.md). */
  redact?: boolean | undefined;
}

/** One previous organization: its file and how many learners moving back takes. */
export interface ReverseTarget {
  /** The org column of its file: a configured key, or the numeric id. */
  org: string;
  orgId: number;
  /** Whether `org` is a key with a token here (else the id: a token of that organization is needed). */
  configured: boolean;
  file: string;
  learners: number;
}

export interface ReverseSummary {
  targets: ReverseTarget[];
  regrant: { file: string; rows: number; learners: number };
  unknown: { file: string; rows: number };
  checkByHand: { file: string; rows: number };
}

export const REGRANT_COLUMNS = [
  'learnerId',
  'userId',
  'email',
  'name',
  'role',
  'authorizedAt',
  'authorizedById',
  'previousOrg',
  'previousOrgId',
  'org',
  'transferId',
] as const;
const UNKNOWN_COLUMNS = ['org', 'learnerId', 'runId', 'state', 'transferId', 'why'] as const;
const CHECK_COLUMNS = ['org', 'learnerId', 'runId', 'state', 'previousOrgId', 'transferId', 'why'] as const;

export const UNKNOWN_WHY =
  'previous organization not recorded: the learner was enqueued without a read of the learner list ' +
  '(enqueue --csv; plan --check --apply, crawl and reconcile keep it), or by a release that did not keep it';

/** A learner of the scope that a person may have to move back: moved by us, or maybe moved by us. */
interface Candidate {
  org: string;
  learnerId: number;
  record: OutcomeRecord;
}

/** A revoked authorization as the transfer result lists it. */
interface Revoked {
  userId: unknown;
  email: unknown;
  name: unknown;
  role: unknown;
  authorizedAt: unknown;
  authorizedById: unknown;
}

/** What the audit holds of one learner: the revoked authorizations of its transfer, and its lost answers. */
interface LearnerAudit {
  revoked: Revoked[] | undefined;
  unreadable: string | undefined;
  repeat: AuditEntry['repeatCauses'] | undefined;
}

/** The files of a reverse in `dir`, in the order they are written. */
function fixedFiles(dir: string) {
  return {
    regrant: join(dir, 'regrant.csv'),
    unknown: join(dir, 'unknown.csv'),
    checkByHand: join(dir, 'check-by-hand.csv'),
  };
}

/** The learners of the scope moved by us (success buckets) or maybe moved (a repeat, a lost answer). */
async function candidatesOf(ctx: AppContext, o: ReverseOptions): Promise<Candidate[]> {
  const out: Candidate[] = [];
  for (const org of o.orgs) {
    for await (const [learnerId, record] of ctx.store.scan(org)) {
      if (o.runId !== undefined && record.r !== o.runId) continue;
      const b = record.b as Bucket;
      if (b === 'queued' || b === CANCELLED || (isSuccessBucket(b) && b !== 'transferred' && record.pr !== 1))
        continue;
      out.push({ org, learnerId, record });
    }
  }
  return out;
}

function revokedOf(result: unknown): Revoked[] | undefined {
  const list = (result as { authorizations?: { revoked?: unknown } } | null)?.authorizations?.revoked;
  return Array.isArray(list) ? (list as Revoked[]) : undefined;
}

/**
 * One pass over each organization's audit (archive, then stream) from the earliest enqueue of the scope:
 * per learner, the revoked authorizations of the transfer its record names, and its lost answers.
 */
async function auditOf(
  ctx: AppContext,
  candidates: readonly Candidate[],
  archiveDir: string | undefined,
): Promise<Map<string, LearnerAudit>> {
  const found = new Map<string, LearnerAudit>();
  const byOrg = new Map<string, Map<number, OutcomeRecord>>();
  for (const c of candidates) byOrg.set(c.org, (byOrg.get(c.org) ?? new Map()).set(c.learnerId, c.record));
  const src = { stream: new AuditStream(ctx.redis, ctx.keys), archiveDir };
  for (const [org, records] of byOrg) {
    // A day before the first enqueue: the node's clock and Redis's may differ a little.
    const sinceMs = [...records.values()].reduce((m, r) => Math.min(m, r.q), Infinity) - 86_400_000;
    for await (const { entry: e } of searchAudit(src, { orgs: [org], sinceMs })) {
      const r = records.get(e.learnerId);
      if (!r) continue;
      const key = `${org}\u0000${e.learnerId}`;
      const a = found.get(key) ?? { revoked: undefined, unreadable: undefined, repeat: undefined };
      found.set(key, a);
      if (e.possibleRepeat && e.runId === r.r) a.repeat = e.repeatCauses ?? [];
      else if (e.kind === 'unreadable' && e.runId === r.r)
        a.unreadable = String((e.result as { reason?: unknown }).reason ?? 'not JSON');
      else if (e.kind === 'transfer' && (r.x ? e.transferId === r.x : e.runId === r.r)) {
        const revoked = revokedOf(e.result);
        if (revoked) a.revoked = (a.revoked ?? []).concat(revoked);
      }
    }
  }
  return found;
}

/** Why a person must look at this learner before anything is moved back; undefined: nothing to look at. */
function checkWhy(c: Candidate, a: LearnerAudit | undefined): string | undefined {
  const r = c.record;
  if (r.pr === 1 || (a?.repeat && r.b !== 'transferred')) {
    return `possible repeat: ${repeatReason(a?.repeat ?? [])}`;
  }
  if (r.b !== 'transferred') {
    if (a?.unreadable === undefined) return undefined;
    return (
      `unreadable answer (${a.unreadable}): the transfer may have happened, and what it revoked is not on ` +
      `record; look the learner up in the service`
    );
  }
  if (a?.revoked === undefined) {
    return (
      `the audit entry of transfer ${r.x ?? '(no transfer id)'} was not found (trimmed from Redis, and not ` +
      'in the archive read: set AUDIT_ARCHIVE_DIR or pass --archive): its revoked authorizations are unknown'
    );
  }
  return undefined;
}

/**
 * Per organization id: the key to enqueue it under (a key with a token, and that id given by --org-id or
 * remembered in Redis), if any. A given id wins over a remembered one.
 */
async function keysById(
  ctx: AppContext,
  given: Readonly<Record<string, number>>,
): Promise<Map<number, string>> {
  const out = new Map<number, string>();
  const ids = { ...(await new OrgIds(ctx.redis, ctx.keys).all()), ...given };
  const order = [...Object.entries(given), ...Object.entries(ids)];
  for (const [key, id] of order) {
    if (tokensOf(ctx.config, key).length > 0 && !out.has(id)) out.set(id, key);
  }
  return out;
}

async function writeCsv(path: string, header: readonly string[], rows: readonly unknown[][]): Promise<void> {
  const out = new PrivateOutput(path);
  try {
    out.stream.write(csvLine(header));
    for (const row of rows) out.stream.write(csvLine(row));
  } catch (err) {
    await out.abort();
    throw err;
  }
  await out.commit();
}

/** The file of one previous organization: move-back-<key>.csv, or move-back-org-<id>.csv. */
function targetFile(dir: string, org: string, configured: boolean): string {
  return join(dir, configured ? `move-back-${org}.csv` : `move-back-org-${org}.csv`);
}

interface Sorted {
  moves: Map<number, Candidate[]>;
  unknown: unknown[][];
  check: unknown[][];
}

/**
 * Learners claimed by another organization now (moved there after the run: a reverse enqueued already,
 * or another run): by `org\0learnerId`, the holder. Moving them "back" would move them from there.
 */
async function movedSince(ctx: AppContext, candidates: readonly Candidate[]): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (let i = 0; i < candidates.length; i += 1000) {
    const chunk = candidates.slice(i, i + 1000);
    const holders = await ctx.claims.holders(chunk.map((c) => c.learnerId));
    chunk.forEach((c, j) => {
      const holder = holders[j];
      if (holder !== undefined && holder !== c.org) out.set(`${c.org}\u0000${c.learnerId}`, holder);
    });
  }
  return out;
}

function sortCandidates(
  candidates: readonly Candidate[],
  audit: Map<string, LearnerAudit>,
  moved: Map<string, string>,
): Sorted {
  const s: Sorted = { moves: new Map(), unknown: [], check: [] };
  for (const c of candidates) {
    const r = c.record;
    const holder = moved.get(`${c.org}\u0000${c.learnerId}`);
    if (holder !== undefined && (r.b === 'transferred' || r.pr === 1)) {
      const why = `claimed by ${holder} now (moved there after this run): not moved again from here`;
      s.check.push([c.org, c.learnerId, r.r, r.b, r.po ?? '', r.x ?? '', why]);
      continue;
    }
    // Moved by us, from where no one knows: first of all unknown (its audit says what it revoked).
    if (r.b === 'transferred' && r.po === undefined) {
      s.unknown.push([c.org, c.learnerId, r.r, r.b, r.x ?? '', UNKNOWN_WHY]);
      continue;
    }
    const why = checkWhy(c, audit.get(`${c.org}\u0000${c.learnerId}`));
    if (why !== undefined) {
      s.check.push([c.org, c.learnerId, r.r, r.b, r.po ?? '', r.x ?? '', why]);
    } else if (r.b === 'transferred' && r.po !== undefined) {
      const list = s.moves.get(r.po) ?? [];
      list.push(c);
      s.moves.set(r.po, list);
    }
  }
  return s;
}

/** Writes the reverse files into `dir` (see the top of this file). */
export async function writeReverse(ctx: AppContext, o: ReverseOptions): Promise<ReverseSummary> {
  if (o.orgs.length === 0) throw new LearnerTransferError('LT_USAGE', 'report --reverse: no organization');
  mkdirSync(o.dir, { recursive: true, mode: 0o700 });
  const fixed = fixedFiles(o.dir);
  // Every fixed target is checked before any file is started: one planted link refuses the whole reverse.
  for (const file of Object.values(fixed)) assertPrivateTarget(file);
  const candidates = await candidatesOf(ctx, o);
  const moved = await movedSince(ctx, candidates);
  const audit = await auditOf(ctx, candidates, o.archiveDir ?? ctx.config.auditArchiveDir);
  const sorted = sortCandidates(candidates, audit, moved);
  const keys = await keysById(ctx, o.orgIds ?? {});
  const targets: ReverseTarget[] = [];
  const regrant: unknown[][] = [];
  for (const [orgId, list] of [...sorted.moves].sort(([a], [b]) => a - b)) {
    const key = keys.get(orgId);
    const org = key ?? String(orgId);
    const file = targetFile(o.dir, org, key !== undefined);
    list.sort((a, b) => a.learnerId - b.learnerId);
    await writeCsv(
      file,
      ['learnerId', 'org'],
      list.map((c) => [c.learnerId, org]),
    );
    targets.push({ org, orgId, configured: key !== undefined, file, learners: list.length });
    for (const c of list) {
      for (const found of audit.get(`${c.org}\u0000${c.learnerId}`)?.revoked ?? []) {
        const v = o.redact ? (redactAuthorization(found) as typeof found) : found;
        regrant.push([
          c.learnerId,
          v.userId,
          v.email ?? '',
          v.name ?? '',
          v.role,
          v.authorizedAt,
          v.authorizedById,
          org,
          orgId,
          c.org,
          c.record.x ?? '',
        ]);
      }
    }
  }
  await writeCsv(fixed.regrant, REGRANT_COLUMNS, regrant);
  await writeCsv(fixed.unknown, UNKNOWN_COLUMNS, sorted.unknown);
  await writeCsv(fixed.checkByHand, CHECK_COLUMNS, sorted.check);
  return {
    targets,
    regrant: {
      file: fixed.regrant,
      rows: regrant.length,
      learners: new Set(regrant.map((r) => r[0])).size,
    },
    unknown: { file: fixed.unknown, rows: sorted.unknown.length },
    checkByHand: { file: fixed.checkByHand, rows: sorted.check.length },
  };
}

/** What `report --reverse` prints: each file, and what to do with it. */
export function formatReverse(s: ReverseSummary): string {
  const lines = s.targets.map(
    (t) =>
      `move back ${t.learners} to ${t.configured ? t.org : `organization ${t.orgId}`} -> ${t.file}` +
      (t.configured
        ? ` (enqueue --csv ${t.file} --move)`
        : ` (no key here has a token of organization ${t.orgId} and its id: configure one, set its ` +
          'org column, then enqueue --csv FILE --move)'),
  );
  if (s.targets.length === 0) lines.push('nothing to move back');
  lines.push(
    `regrant   ${s.regrant.rows} revoked authorizations of ${s.regrant.learners} learners -> ${s.regrant.file} ` +
      "(for each previous organization's administrators to grant again: the service cannot)",
    `unknown   ${s.unknown.rows} learners whose previous organization was not recorded -> ${s.unknown.file}`,
    `by hand   ${s.checkByHand.rows} learners to check by hand (possible repeat, unreadable answer, ` +
      `audit not found) -> ${s.checkByHand.file}`,
  );
  return lines.join('\n');
}
