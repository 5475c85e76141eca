// Private files (reports, result files, exports, rejects, drift reports): written to a new 0600
// temporary file beside the target (O_EXCL|O_NOFOLLOW), fsynced, then renamed over it; a target
// that is a link or not a regular file is refused. A failed write leaves the target as it was
// (docs/exports.md).
import { randomBytes } from 'node:crypto';
import {
  closeSync,
  constants,
  createWriteStream,
  fchmodSync,
  fsyncSync,
  lstatSync,
  openSync,
  renameSync,
  unlinkSync,
  writeFileSync,
  type WriteStream,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { LearnerTransferError } from './errors.ts';

export const PRIVATE_FILE_MODE = 0o600;

// O_NOFOLLOW is redundant beside O_CREAT|O_EXCL on Linux (a link fails EEXIST), said anyway.
const CREATE_NEW = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | (constants.O_NOFOLLOW ?? 0);

/** Refuses a target that is a symbolic link or not a regular file (LT_OUTPUT_UNSAFE, exit 2). */
export function assertPrivateTarget(path: string): void {
  let stat;
  try {
    stat = lstatSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  if (stat.isSymbolicLink()) {
    throw new LearnerTransferError(
      'LT_OUTPUT_UNSAFE',
      `${path} is a symbolic link: refusing to write through it (remove the link or choose another path)`,
    );
  }
  if (!stat.isFile()) {
    throw new LearnerTransferError(
      'LT_OUTPUT_UNSAFE',
      `${path} exists and is not a regular file: refusing to replace it (choose another path)`,
    );
  }
}

/** A new temporary file beside `path`, mode 0600: its path and descriptor. */
function openTemp(path: string): { tmp: string; fd: number } {
  const tmp = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
  const fd = openSync(tmp, CREATE_NEW, PRIVATE_FILE_MODE);
  try {
    fchmodSync(fd, PRIVATE_FILE_MODE); // open()'s mode is narrowed by the umask, never widened: exact
  } catch (err) {
    closeSync(fd);
    unlinkSync(tmp);
    throw err;
  }
  return { tmp, fd };
}

/**
 * Renames the finished temporary file over `path` (checked again), then syncs the directory.
 */
function moveIntoPlace(tmp: string, path: string): void {
  assertPrivateTarget(path);
  renameSync(tmp, path);
  try {
    const dir = openSync(dirname(path), 'r');
    try {
      fsyncSync(dir);
    } finally {
      closeSync(dir);
    }
  } catch {
    // Some file systems cannot sync a directory: the file itself is synced, the rename is done.
  }
}

function removeQuietly(tmp: string): void {
  try {
    unlinkSync(tmp);
  } catch {
    // Already gone.
  }
}

/**
 * A private file being written: write to `stream`, then `commit()` (the target appears,
 * complete) or `abort()` (the target is untouched). An unsafe target is refused before anything
 * is created.
 */
export class PrivateOutput {
  readonly path: string;
  readonly stream: WriteStream;
  readonly #tmp: string;
  readonly #fd: number;
  #settled = false;

  constructor(path: string) {
    assertPrivateTarget(path);
    const { tmp, fd } = openTemp(path);
    this.path = path;
    this.#tmp = tmp;
    this.#fd = fd;
    // Not closed when the stream finishes: it is synced first. Destroying the stream closes it.
    this.stream = createWriteStream(tmp, { fd, autoClose: false });
    // A failed write is kept by the stream (`errored`) and refused by commit(); an abort mid-write
    // errors too. Neither may crash the process.
    this.stream.on('error', () => {});
  }

  /** Ends the stream, syncs and closes the file, and renames it over the target. */
  async commit(): Promise<void> {
    if (this.#settled) return;
    this.#settled = true;
    try {
      await new Promise<void>((resolve, reject) => {
        if (this.stream.errored) return reject(this.stream.errored);
        this.stream.end((err?: Error | null) => (err ? reject(err) : resolve()));
      });
      fsyncSync(this.#fd);
      await this.#close();
      moveIntoPlace(this.#tmp, this.path);
    } catch (err) {
      await this.#close();
      removeQuietly(this.#tmp);
      throw err;
    }
  }

  /** Drops what was written: the temporary file is removed, the target stays as it was. */
  async abort(): Promise<void> {
    if (this.#settled) return;
    this.#settled = true;
    await this.#close();
    removeQuietly(this.#tmp);
  }

  /** Closes the descriptor through the stream (its destroy closes it), once. */
  async #close(): Promise<void> {
    if (this.stream.closed) return;
    await new Promise<void>((resolve) => {
      this.stream.once('close', () => resolve());
      if (!this.stream.destroyed) this.stream.destroy();
    });
  }
}

/** writeFileSync, through a temporary file renamed into place (see above). */
export function writePrivateFileSync(path: string, data: string): void {
  assertPrivateTarget(path);
  const { tmp, fd } = openTemp(path);
  try {
    try {
      writeFileSync(fd, data);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    moveIntoPlace(tmp, path);
  } catch (err) {
    removeQuietly(tmp);
    throw err;
  }
}
