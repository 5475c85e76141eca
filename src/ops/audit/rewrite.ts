// Replacing audit day files for retention and `audit forget`, under the archiver's lease: written whole
// beside, fsynced, renamed over, so a crash leaves the old file or the new one. A file a crash note
// names, or torn at its end, is skipped; unchanged lines are kept byte for byte.
import { randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { open, readdir, rename, unlink } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { createInterface } from 'node:readline';
import { createGzip, createGunzip } from 'node:zlib';
import { isValidOrgKey } from '../../core/keys.ts';
import type { ArchiveState } from '../../outcomes/audit-stream.ts';
import { fsyncDir } from '../../core/fsync-dir.ts';
import { archivedDays, dayFile, type ArchivedEntry } from './archive-file.ts';

/** What a change makes of one entry: the new entry, or undefined to keep the line as it is. */
export type EntryChange = (entry: ArchivedEntry) => ArchivedEntry | undefined;

export interface FileRewrite {
  file: string;
  /** Entries that changed (or would, in a dry run). */
  changed: number;
  /** Why the file was left alone: a crash note names it, or its end is torn. */
  skipped?: string | undefined;
}

/** Every line of a day file, decompressed; throws a torn-end error (Z_BUF_ERROR) like readDayFile. */
async function* linesOf(path: string): AsyncGenerator<string> {
  const source = createReadStream(path);
  const gunzipped = createGunzip();
  source.on('error', (err) => gunzipped.destroy(err));
  yield* createInterface({ input: source.pipe(gunzipped), crlfDelay: Infinity });
}

/** A line and what the change makes of it (the line itself when nothing changes or it is not JSON). */
function changedLine(line: string, change: EntryChange): string | undefined {
  if (!line) return undefined;
  let entry: ArchivedEntry;
  try {
    entry = JSON.parse(line) as ArchivedEntry;
  } catch {
    return undefined;
  }
  const next = change(entry);
  return next ? JSON.stringify(next) : undefined;
}

async function countChanges(path: string, change: EntryChange): Promise<number> {
  let n = 0;
  for await (const line of linesOf(path)) if (changedLine(line, change) !== undefined) n++;
  return n;
}

/** Writes the changed file beside the old one, fsyncs it, renames it over, fsyncs the directory. */
async function writeBeside(path: string, change: EntryChange): Promise<number> {
  const tmp = join(path, '..', `.${basename(path)}.${randomUUID()}.tmp`);
  let n = 0;
  async function* changed(): AsyncGenerator<string> {
    for await (const line of linesOf(path)) {
      if (!line) continue;
      const next = changedLine(line, change);
      if (next !== undefined) n++;
      yield `${next ?? line}\n`;
    }
  }
  try {
    await pipeline(changed(), createGzip(), createWriteStream(tmp, { flags: 'wx', mode: 0o600 }));
    const handle = await open(tmp, 'r+');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
  await rename(tmp, path);
  await fsyncDir(join(path, '..'));
  return n;
}

/** Whether a crash note of the organization names this file (by its organization and day file name). */
export function notedFile(state: ArchiveState, org: string, file: string): boolean {
  const tail = join(org, basename(file));
  const notes = [state.pending?.file, ...Object.values(state.parked ?? {}).map((p) => p.file)];
  return notes.some((f) => f !== undefined && (f === file || f.endsWith(`/${tail}`)));
}

const isTorn = (err: unknown) => (err as NodeJS.ErrnoException).code === 'Z_BUF_ERROR';

/**
 * One day file through `change`: counted, and unless `dryRun` rewritten when something changes. A file a
 * note names, or torn at its end, is skipped (and says why).
 */
export async function rewriteDayFile(
  file: string,
  change: EntryChange,
  options: { dryRun: boolean; noted: boolean },
): Promise<FileRewrite> {
  if (options.noted) return { file, changed: 0, skipped: 'a crash note names it (the next pass settles it)' };
  try {
    const changed = await countChanges(file, change);
    if (changed === 0 || options.dryRun) return { file, changed };
    return { file, changed: await writeBeside(file, change) };
  } catch (err) {
    if (isTorn(err)) return { file, changed: 0, skipped: 'its end is torn (a write under way?)' };
    throw err;
  }
}

/** The organizations with a directory in the archive (whether or not they are configured now). */
export async function archivedOrgs(dir: string): Promise<string[]> {
  try {
    const names = await readdir(dir, { withFileTypes: true });
    return names
      .filter((d) => d.isDirectory() && isValidOrgKey(d.name))
      .map((d) => d.name)
      .sort();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
}

/** The day files of an organization up to `until` (a day, included), oldest first. */
export async function dayFilesOf(dir: string, org: string, until?: string): Promise<string[]> {
  return (await archivedDays(dir, org, { until })).map((d) => dayFile(dir, org, d));
}
