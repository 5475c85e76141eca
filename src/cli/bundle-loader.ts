// How the compiled binary loads its own code (scripts/compile.mjs writes it as CommonJS files:
// the command table cli/main.cjs, a file per command, the chunks they share). Node 20 keeps no
// compiled code between runs, so each file is compiled through node:vm with V8's code cache: the
// first run of a build writes `<file>.cache` beside each file it loaded, and the next runs skip
// most of the compiling (docs/benchmarks.md). A cache is only a shortcut: missing, unreadable,
// made for another file or refused by V8 (another Node version), the file compiles as it would
// without it; a folder it cannot write to (an installed package owned by root) keeps none.
import { readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Script } from 'node:vm';

/**
 * Every file loaded, by path: test/helpers/load-trace.mjs lists them as Node's own loaders' files.
 */
export const LOADED_FILES = Symbol.for('learner-transfer.loaded-files');

/**
 * When a process that runs on writes the caches of what it loaded so far (its exit writes the
 * rest).
 */
const WRITE_AFTER_MS = 5_000;

interface Loaded {
  module: { exports: unknown };
  script?: Script;
  /**
   * Its cache's first line: the file's size and modification time (a cache never outlives its
   * file).
   */
  stamp: string;
  /** Its cache was used, or written: nothing to write. */
  cached: boolean;
}

const loaded = new Map<string, Loaded>();
(globalThis as Record<symbol, unknown>)[LOADED_FILES] = loaded;

/** The cache of `file` if it is this version's of the file, else undefined. */
function readCache(file: string, stamp: string): Buffer | undefined {
  let data: Buffer;
  try {
    data = readFileSync(`${file}.cache`);
  } catch {
    return undefined;
  }
  const end = data.indexOf(10);
  if (end < 0 || data.toString('latin1', 0, end) !== stamp) return undefined;
  return data.subarray(end + 1);
}

/** Writes the cache of each file loaded that has none yet; a folder that refuses it keeps none. */
export function writeCaches(): void {
  for (const [file, entry] of loaded) {
    if (entry.cached || !entry.script) continue;
    entry.cached = true;
    const temp = `${file}.cache.${process.pid}.tmp`;
    try {
      writeFileSync(
        temp,
        Buffer.concat([Buffer.from(`${entry.stamp}\n`, 'latin1'), entry.script.createCachedData()]),
      );
      // Whole or not at all: another process may be reading it.
      renameSync(temp, `${file}.cache`);
    } catch {
      // read-only, full, or gone: the cache is a shortcut, not a need
    }
  }
}

let writeScheduled = false;
function scheduleWrite(): void {
  if (writeScheduled) return;
  writeScheduled = true;
  process.once('exit', writeCaches);
  setTimeout(writeCaches, WRITE_AFTER_MS).unref();
}

/**
 * Loads the CommonJS file `file` (an absolute path) once and returns its exports. Its relative
 * requires are files of the same build, loaded the same way; the others are Node's (packages,
 * node:).
 */
export function loadBundle(file: string): unknown {
  const known = loaded.get(file);
  if (known) return known.module.exports;
  const source = readFileSync(file, 'utf8');
  const { size, mtimeMs } = statSync(file);
  const stamp = `${size}:${mtimeMs}`;
  const cachedData = readCache(file, stamp);
  // On the first line, so that the file's line numbers are the stack's.
  const script = new Script(
    `(function (exports, require, module, __filename, __dirname, __ltUrl) {${source}\n})`,
    { filename: file, ...(cachedData ? { cachedData } : {}) },
  );
  const entry: Loaded = {
    module: { exports: {} },
    script,
    stamp,
    cached: cachedData !== undefined && !script.cachedDataRejected,
  };
  loaded.set(file, entry);
  if (!entry.cached) scheduleWrite();
  const nodeRequire = createRequire(file);
  const own = (id: string) => (id.startsWith('.') ? loadBundle(resolve(dirname(file), id)) : nodeRequire(id));
  const requireFn = Object.assign(own, { resolve: nodeRequire.resolve, cache: nodeRequire.cache });
  const run = script.runInThisContext() as (...args: unknown[]) => void;
  run.call(
    entry.module.exports,
    entry.module.exports,
    requireFn,
    entry.module,
    file,
    dirname(file),
    pathToFileURL(file).href,
  );
  return entry.module.exports;
}
