// One directory fsync for every layer that renames or creates a file it must find after a
// crash.
import { open } from 'node:fs/promises';

/** Fsyncs a directory, so a rename or a new file in it is on disk, where the file system can. */
export async function fsyncDir(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } catch {
    // Some file systems cannot sync a directory: the file itself is synced.
  } finally {
    await handle.close();
  }
}
