// The audit archive's day files (docs/audit-archive.md, "The files"): one gzip member per archiver
// pass, one stream entry a line, private; appended, fsynced and read back before the stream is trimmed.
import { constants, createReadStream } from 'node:fs';
import { mkdir, open, readdir, stat, truncate } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createGunzip, gunzip, gzip } from 'node:zlib';
import { LearnerTransferError } from '../../core/errors.ts';
import { fsyncDir } from '../../core/fsync-dir.ts';
import { idTime, type RawAuditEntry } from '../../outcomes/audit-stream.ts';

const gzipAsync = promisify(gzip);
const gunzipAsync = promisify(gunzip);

const FILE_RE = /^audit-(\d{4}-\d{2}-\d{2})\.ndjson\.gz$/;
// Appended, never followed through a link, created private.
const APPEND = constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | (constants.O_NOFOLLOW ?? 0);

/** A line of the archive. */
export interface ArchivedEntry {
  org: string;
  auditId: string;
  recordedAt: string;
  fields: Record<string, string>;
}

/** The UTC day (YYYY-MM-DD) Redis wrote an entry: its file. */
export function dayOf(id: string): string {
  return dayOfMs(idTime(id));
}

/** The UTC day (YYYY-MM-DD) of a time in ms. */
export function dayOfMs(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

export function dayFile(dir: string, org: string, day: string): string {
  return join(dir, org, `audit-${day}.ndjson.gz`);
}

export function archiveLine(org: string, e: RawAuditEntry): string {
  const line: ArchivedEntry = {
    org,
    auditId: e.id,
    recordedAt: new Date(idTime(e.id)).toISOString(),
    fields: e.fields,
  };
  return `${JSON.stringify(line)}\n`;
}

/** Size of a file (0 when it does not exist yet). */
export async function sizeOf(path: string): Promise<number> {
  try {
    return (await stat(path)).size;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw err;
  }
}

/** One gzip member holding `text` (what one write appends). */
export function gzipMember(text: string): Promise<Buffer> {
  return gzipAsync(Buffer.from(text));
}

/**
 * The day file, created (private, its directory fsynced) when it is not there yet, so that it has an inode
 * before a write is noted: its size and inode (the note names the file, not only its path).
 */
export async function prepareFile(path: string): Promise<{ size: number; ino: string }> {
  const dir = join(path, '..');
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const handle = await open(path, APPEND, 0o600);
  let st;
  try {
    st = await handle.stat({ bigint: true });
  } finally {
    await handle.close();
  }
  if (st.size === 0n) await fsyncDir(dir);
  return { size: Number(st.size), ino: String(st.ino) };
}

/** The inode of a file (undefined when it does not exist). */
export async function inodeOf(path: string): Promise<string | undefined> {
  try {
    return String((await stat(path, { bigint: true })).ino);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** Appends one gzip member holding `text`, fsyncs the file and its directory. Returns the size before. */
export async function appendMember(path: string, text: string | Buffer): Promise<number> {
  const dir = join(path, '..');
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const member = typeof text === 'string' ? await gzipMember(text) : text;
  const handle = await open(path, APPEND, 0o600);
  let before: number;
  try {
    before = (await handle.stat()).size;
    await handle.chmod(0o600);
    await handle.write(member);
    await handle.sync();
  } finally {
    await handle.close();
  }
  if (before === 0) await fsyncDir(dir);
  return before;
}

/**
 * Reads back what was appended from `from` on, from the disk, and checks that it holds exactly the
 * expected entries (their count and last id). Throws when it does not: nothing is then trimmed.
 */
export async function verifyMember(
  path: string,
  from: number,
  expected: { count: number; lastId: string },
): Promise<void> {
  const handle = await open(path, 'r');
  let bytes: Buffer;
  try {
    const size = (await handle.stat()).size;
    bytes = Buffer.alloc(size - from);
    await handle.read(bytes, 0, bytes.length, from);
  } finally {
    await handle.close();
  }
  const lines = (await gunzipAsync(bytes)).toString('utf8').split('\n').filter(Boolean);
  const last = lines.length ? (JSON.parse(lines[lines.length - 1] as string) as ArchivedEntry) : undefined;
  if (lines.length !== expected.count || last?.auditId !== expected.lastId) {
    throw new LearnerTransferError(
      'LT_INTERNAL',
      `${path}: read back ${lines.length} entries ending at ${last?.auditId ?? 'none'}, ` +
        `expected ${expected.count} ending at ${expected.lastId}: nothing was trimmed`,
    );
  }
}

/** Cuts a file back to `size` (a write a crash left unfinished, or unconfirmed), and syncs it. */
export async function truncateTo(path: string, size: number): Promise<boolean> {
  if ((await sizeOf(path)) <= size) return false;
  await truncate(path, size);
  const handle = await open(path, 'r+');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
  return true;
}

/** The days archived for an organization, oldest first, within [since, until] when given. */
export async function archivedDays(
  dir: string,
  org: string,
  range: { since?: string | undefined; until?: string | undefined } = {},
): Promise<string[]> {
  let names: string[];
  try {
    names = await readdir(join(dir, org));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  const days: string[] = [];
  for (const name of names) {
    const day = FILE_RE.exec(name)?.[1];
    if (!day) continue;
    if (range.since && day < range.since) continue;
    if (range.until && day > range.until) continue;
    days.push(day);
  }
  return days.sort();
}

/** Every entry of one day file, in order (a stream: a day file is never held whole in memory). */
export async function* readDayFile(path: string): AsyncGenerator<ArchivedEntry> {
  const source = createReadStream(path);
  const gunzipped = createGunzip();
  source.on('error', (err) => gunzipped.destroy(err));
  const lines = createInterface({ input: source.pipe(gunzipped), crlfDelay: Infinity });
  let n = 0;
  try {
    for await (const line of lines) {
      n++;
      if (!line) continue;
      let entry: ArchivedEntry;
      try {
        entry = JSON.parse(line) as ArchivedEntry;
      } catch (err) {
        throw new LearnerTransferError('LT_INPUT_INVALID', `${path}: line ${n} is not JSON`, { cause: err });
      }
      yield entry;
    }
  } catch (err) {
    // A torn last member: a write under way, or one a crash cut short that the next pass cuts back. Its
    // entries are still in the stream (the cursor never moved past them): the file ends before it.
    if ((err as NodeJS.ErrnoException).code === 'Z_BUF_ERROR') return;
    throw err;
  }
}
