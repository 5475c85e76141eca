// One directory fsync for the whole of src/ (core/fsync-dir.ts): the audit archive, its rewrites and the
// spool's forget all sync a directory through it, so that a fix to it (a file system that cannot sync a
// directory, say) reaches every one of them. A copy of it elsewhere fails here.
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { fsyncDir } from '../../src/core/fsync-dir.ts';

const SRC = new URL('../../src/', import.meta.url).pathname;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return name.endsWith('.ts') ? [path] : [];
  });
}

/** A file handle opened read-only and then synced: what a directory fsync is made of. */
const DIR_SYNC = /=\s*await\s+open\(\s*\w+,\s*'r'\s*\);[\s\S]{0,80}?\.sync\(\)/;

const tmp = mkdtempSync(join(tmpdir(), 'lt-fsync-dir-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('fsyncDir', () => {
  it('is the only directory fsync in src/', () => {
    const copies = sourceFiles(SRC)
      .filter((path) => DIR_SYNC.test(readFileSync(path, 'utf8')))
      .map((path) => relative(SRC, path));
    expect(copies).toEqual(['core/fsync-dir.ts']);
  });

  it('syncs a directory, and says when there is none', async () => {
    await expect(fsyncDir(tmp)).resolves.toBeUndefined();
    await expect(fsyncDir(join(tmp, 'missing'))).rejects.toMatchObject({ code: 'ENOENT' });
  });
});
