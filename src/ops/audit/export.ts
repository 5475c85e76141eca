// audit: every transfer's audit exported as NDJSON, oldest first (archive files, then the stream). With
// `--trim`, the stream is trimmed once the file is written, fsynced and read back, and only up to the
// ids exported (docs/audit-archive.md).
import { createReadStream, mkdirSync } from 'node:fs';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { dirname } from 'node:path';
import { PrivateOutput } from '../../core/private-file.ts';
import { jsonForTerminal } from '../../core/terminal-safe.ts';
import { LearnerTransferError } from '../../core/errors.ts';
import type { OutcomeStore } from '../../outcomes/store.ts';
import { auditLine, searchAudit, type AuditFilter, type AuditSources } from './search.ts';
import { redactForViewer } from './redact.ts';

export type { AuditFilter } from './search.ts';

export interface ExportResult {
  written: number;
  /** Entries trimmed from the streams (with trim). */
  trimmed: number;
}

interface OrgTally {
  count: number;
  lastId: string;
  /** The last stream entry exported: the stream is trimmed up to it. */
  lastStreamId: string;
}

/**
 * Writes matching audit entries to `out` (mode 0600: names and e-mails; renamed into place when
 * complete, never written through a link) or stdout (C1 and bidi controls escaped, losslessly, so a
 * terminal runs nothing of the service's text). Returns how many it wrote.
 */
export async function exportAudit(
  src: AuditSources | OutcomeStore,
  filter: AuditFilter,
  out?: string,
  stdout: NodeJS.WritableStream = process.stdout,
  options: { redact?: boolean | undefined } = {},
): Promise<number> {
  // The store alone: its streams, no archive.
  const sources = 'auditStream' in src ? { stream: src.auditStream() } : src;
  return (await writeExport(sources, filter, out, stdout, undefined, options.redact === true)).written;
}

async function writeExport(
  src: AuditSources,
  filter: AuditFilter,
  out: string | undefined,
  stdout: NodeJS.WritableStream,
  upto?: ReadonlyMap<string, string>,
  redact = false,
): Promise<{ written: number; tally: Map<string, OrgTally> }> {
  let file: PrivateOutput | undefined;
  if (out) {
    mkdirSync(dirname(out), { recursive: true });
    file = new PrivateOutput(out);
  }
  const stream: NodeJS.WritableStream = file?.stream ?? stdout;
  const tally = new Map<string, OrgTally>();
  let n = 0;
  try {
    for await (const { org, entry, file: archived } of searchAudit(src, filter, upto ? { upto } : {})) {
      // --redact: no e-mail address or name (docs/exports.md marks the columns), as the viewer sees it.
      const json = `${JSON.stringify(auditLine(org, redact ? redactForViewer(entry) : entry))}\n`;
      const t = tally.get(org) ?? { count: 0, lastId: '', lastStreamId: '' };
      t.count++;
      t.lastId = entry.id;
      if (!archived) t.lastStreamId = entry.id;
      tally.set(org, t);
      n++;
      if (!stream.write(out ? json : jsonForTerminal(json))) await once(stream, 'drain');
    }
  } catch (err) {
    // A failed export leaves no partial file (and an earlier export at that path as it was).
    await file?.abort();
    throw err;
  }
  // Written, fsynced, renamed into place, the directory fsynced (PrivateOutput.commit).
  await file?.commit();
  return { written: n, tally };
}

/** Reads the file back from the disk: per organization, its lines and last audit id. */
async function tallyFile(path: string): Promise<Map<string, { count: number; lastId: string }>> {
  const seen = new Map<string, { count: number; lastId: string }>();
  const lines = createInterface({ input: createReadStream(path), crlfDelay: Infinity });
  for await (const line of lines) {
    if (!line) continue;
    const { org, auditId } = JSON.parse(line) as { org: string; auditId: string };
    const t = seen.get(org) ?? { count: 0, lastId: '' };
    t.count++;
    t.lastId = auditId;
    seen.set(org, t);
  }
  return seen;
}

/**
 * `audit --out FILE --trim`: exports every entry of the organizations (no other filter: the trim would
 * take entries the file does not hold), checks the file on disk, then trims each stream up to its last
 * exported entry. Throws before any trim when the file does not read back as written.
 */
export async function exportAndTrim(
  src: AuditSources,
  orgs: readonly string[],
  out: string,
): Promise<ExportResult> {
  // The newest entry of each stream now: the export stops there, and so does the trim.
  const upto = new Map<string, string>();
  for (const org of orgs) upto.set(org, await src.stream.lastId(org));
  const { written, tally } = await writeExport(src, { orgs }, out, process.stdout, upto);
  const onDisk = await tallyFile(out);
  for (const [org, t] of tally) {
    const d = onDisk.get(org);
    if (d?.count !== t.count || d.lastId !== t.lastId) {
      throw new LearnerTransferError(
        'LT_INTERNAL',
        `${out}: read back ${d?.count ?? 0} entries of ${org} ending at ${d?.lastId ?? 'none'}, expected ` +
          `${t.count} ending at ${t.lastId}: nothing was trimmed`,
      );
    }
  }
  let trimmed = 0;
  for (const [org, t] of tally) {
    if (t.lastStreamId) trimmed += await src.stream.trimThrough(org, t.lastStreamId);
  }
  return { written, trimmed };
}
