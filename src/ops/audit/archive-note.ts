// A dead exporter's write note: which file it is for (disk id and inode, not the path: docs/audit-archive.md,
// "Hosts and disks"), and whether this process may cut it back; a note for another disk is parked for it.
import { randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { link, mkdir, open, readFile, unlink } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { createGunzip } from 'node:zlib';
import { LearnerTransferError } from '../../core/errors.ts';
import type { Logger } from '../../core/log.ts';
import { compareIds, type ArchiveState, type AuditStream } from '../../outcomes/audit-stream.ts';
import { inodeOf, sizeOf, truncateTo, type ArchivedEntry } from './archive-file.ts';

const DISK_ID_FILE = '.archive-id';
const DISK_ID_RE = /^[0-9a-f-]{36}$/;

/** This archive directory's id: read, or made once (by whichever process first gets there). */
export async function archiveDiskId(dir: string): Promise<string> {
  const path = join(dir, DISK_ID_FILE);
  const read = async () => {
    const id = (await readFile(path, 'utf8')).trim();
    if (!DISK_ID_RE.test(id))
      throw new LearnerTransferError(
        'LT_INTERNAL',
        `${path}: not an archive id (AUDIT_ARCHIVE_DIR's own file)`,
      );
    return id;
  };
  try {
    return await read();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  await mkdir(dir, { recursive: true, mode: 0o700 });
  // Written whole and synced, then linked into place: another process reads a complete id or none.
  const tmp = join(dir, `${DISK_ID_FILE}.${randomUUID()}.tmp`);
  const handle = await open(tmp, 'wx', 0o600);
  try {
    await handle.writeFile(`${randomUUID()}\n`);
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await link(tmp, path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    await unlink(tmp);
  }
  return read();
}

/**
 * Whether what follows `from` in the file is only a dead write: gzip members (the last one may be torn)
 * whose entries all come after `cursor`. A file from another disk fails: at `from` there is no member, or
 * its entries were archived already (at or before the cursor).
 */
export async function tailIsUnconfirmed(path: string, from: number, cursor: string): Promise<boolean> {
  const source = createReadStream(path, { start: from });
  const gunzipped = createGunzip();
  source.on('error', (err) => gunzipped.destroy(err));
  const lines = createInterface({ input: source.pipe(gunzipped), crlfDelay: Infinity });
  try {
    for await (const line of lines) {
      if (!line) continue;
      let id: string | undefined;
      try {
        id = (JSON.parse(line) as ArchivedEntry).auditId;
      } catch {
        return false;
      }
      if (typeof id !== 'string' || (cursor && compareIds(id, cursor) <= 0)) return false;
    }
    return true;
  } catch (err) {
    // Torn at the end (the write was cut short): what was read is the write's.
    return (err as NodeJS.ErrnoException).code === 'Z_BUF_ERROR';
  } finally {
    lines.close();
    source.destroy();
  }
}

/**
 * Settles the notes of an organization before this process writes its files: a note parked for this disk
 * (the dead write cut back, if the file has nothing after it), and the pending one of a dead exporter.
 * Never cuts a file that is not the noted one: such a note is warned about once and given up (its entries
 * are still in the stream and are archived again here).
 */
export async function settleNotes(
  stream: AuditStream,
  org: string,
  state: ArchiveState,
  disk: string,
  logger: Logger | undefined,
): Promise<void> {
  const mine = state.parked?.[disk];
  if (mine) {
    const size = await sizeOf(mine.file);
    if ((await inodeOf(mine.file)) === mine.ino && size > mine.size) {
      if (size <= mine.end) {
        await truncateTo(mine.file, mine.size);
        logger?.warn({ org, file: mine.file }, 'audit archive: undid an unfinished write of this disk');
      } else
        logger?.warn(
          { org, file: mine.file },
          'audit archive: the file grew past an unfinished write of this disk; left as is',
        );
    }
    await stream.unpark(org, disk);
  }
  const note = state.pending;
  if (!note) return;
  const id = note.identity;
  if (id && id.disk !== disk) {
    await stream.park(org, { file: note.file, size: note.size, end: note.end ?? note.size, ...id });
    logger?.warn(
      { org, file: note.file },
      `audit archive: the note of an unfinished write was for ${note.file} on another disk (another ` +
        `AUDIT_ARCHIVE_DIR): this file is left as is, the entries are archived again here`,
    );
    return;
  }
  if ((await sizeOf(note.file)) > note.size) {
    let why: string | undefined;
    if (id && (await inodeOf(note.file)) !== id.ino) why = 'another file is at that path now';
    else if (!(await tailIsUnconfirmed(note.file, note.size, state.last)))
      why = 'the file does not end with that write (another disk, or another file)';
    if (why)
      logger?.warn(
        { org, file: note.file },
        `audit archive: the note of an unfinished write is not for ${note.file} as it is (${why}): ` +
          'left as is, the entries are archived again',
      );
    else if (await truncateTo(note.file, note.size))
      logger?.warn({ org, file: note.file }, 'audit archive: undid an unfinished write');
  }
  await stream.abandon(org);
}
