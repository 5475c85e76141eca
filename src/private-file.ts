// Files that hold people's names and e-mails (reports, result files, audit exports, rejects, drift
// reports) are created readable by their owner only: 0600, whatever the umask, and also when the file
// already existed with a wider mode (it is truncated and rewritten, so its old mode must not survive).
import { closeSync, createWriteStream, fchmodSync, openSync, writeFileSync, type WriteStream } from 'node:fs';

export const PRIVATE_FILE_MODE = 0o600;

/** Opens `path` for writing (truncated), mode 0600. open()'s mode applies only to a file it creates. */
function openPrivate(path: string): number {
  const fd = openSync(path, 'w', PRIVATE_FILE_MODE);
  try {
    fchmodSync(fd, PRIVATE_FILE_MODE);
  } catch (err) {
    closeSync(fd);
    throw err;
  }
  return fd;
}

/** A write stream to `path`, truncated, mode 0600. */
export function createPrivateWriteStream(path: string): WriteStream {
  return createWriteStream(path, { fd: openPrivate(path) });
}

/** writeFileSync, mode 0600. */
export function writePrivateFileSync(path: string, data: string): void {
  const fd = openPrivate(path);
  try {
    writeFileSync(fd, data);
  } finally {
    closeSync(fd);
  }
}
