// What is kept of a 200 whose body is not a transfer result: a prefix, length and SHA-256 in Redis, the
// whole body once on disk beside the spool, named by its hash (docs/redis-memory.md, "Unreadable answers").
import { createHash, randomUUID } from 'node:crypto';
import { chmodSync, mkdirSync } from 'node:fs';
import { open, readdir, rename, stat, unlink, utimes } from 'node:fs/promises';
import { join } from 'node:path';
import { fsyncDir } from '../core/fsync-dir.ts';
import type { KeptBodies } from '../ops/audit/retention.ts';

/** The most of an unreadable body that goes to Redis (a real transfer result is 0.5-2 KB). */
export const UNREADABLE_PREFIX = 8 * 1024;

export interface KeptBody {
  /** The body's first bytes (at most UNREADABLE_PREFIX, cut on a character boundary). */
  prefix: string;
  /** Its whole length in bytes (UTF-8), as far as it arrived and within the client's cap. */
  bytes: number;
  /** SHA-256 (hex) of those bytes. */
  sha256: string;
}

/** The prefix, length and hash of a body; pure. */
export function keepOf(text: string): KeptBody {
  const buf = Buffer.from(text, 'utf8');
  const sha256 = createHash('sha256').update(buf).digest('hex');
  if (buf.length <= UNREADABLE_PREFIX) return { prefix: text, bytes: buf.length, sha256 };
  // Back off to the start of a character: a cut inside one would keep a replacement character.
  let end = UNREADABLE_PREFIX;
  while (end > 0 && ((buf[end] as number) & 0xc0) === 0x80) end--;
  return { prefix: buf.subarray(0, end).toString('utf8'), bytes: buf.length, sha256 };
}

const isMissing = (err: unknown) => (err as NodeJS.ErrnoException).code === 'ENOENT';

/** Bodies longer than their prefix, whole, one file per SHA-256 under `<SPOOL_DIR>/bodies`. */
export class BodyArchive implements KeptBodies {
  readonly dir: string;

  constructor(spoolDir: string) {
    this.dir = join(spoolDir, 'bodies');
  }

  /**
   * Writes the body (fsynced, mode 0600) unless a file of that hash is there already; then its time is
   * made now: this answer is the newest that carried it, and the retention counts from it.
   */
  async keep(kept: KeptBody, text: string): Promise<void> {
    if (kept.bytes <= UNREADABLE_PREFIX) return;
    const path = join(this.dir, `${kept.sha256}.body`);
    try {
      const now = new Date();
      await utimes(path, now, now);
      return;
    } catch (err) {
      // Not there (never kept, or deleted by the retention meanwhile): written below.
      if (!isMissing(err)) throw err;
    }
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    chmodSync(this.dir, 0o700);
    // 'wx' on a name of our own: never through a link someone planted, never into another writer's file.
    const tmp = `${path}.${process.pid}.${randomUUID()}.tmp`;
    const file = await open(tmp, 'wx', 0o600);
    try {
      await file.writeFile(text, 'utf8');
      await file.sync();
    } finally {
      await file.close();
    }
    // Same hash, same bytes: a rename over a file another process finished first changes nothing.
    await rename(tmp, path);
  }

  /**
   * Deletes the bodies whose newest answer came before `cutoffMs` (AUDIT_PERSONAL_RETENTION): a body that
   * could not be parsed goes whole, as its prefix in the entry does; the entries keep its length and hash.
   * Returns how many were deleted.
   */
  async removeBefore(cutoffMs: number): Promise<number> {
    let names: string[];
    try {
      names = (await readdir(this.dir)).filter((n) => n.endsWith('.body'));
    } catch (err) {
      if (isMissing(err)) return 0;
      throw err;
    }
    let n = 0;
    for (const name of names) {
      const path = join(this.dir, name);
      try {
        if ((await stat(path)).mtimeMs >= cutoffMs) continue;
        await unlink(path);
        n++;
      } catch (err) {
        // Deleted by another process of the same SPOOL_DIR meanwhile.
        if (!isMissing(err)) throw err;
      }
    }
    if (n > 0) await fsyncDir(this.dir);
    return n;
  }
}
