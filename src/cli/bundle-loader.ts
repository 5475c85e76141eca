// How the compiled binary loads its own code (scripts/compile.mjs writes it as CommonJS files:
// the command table cli/main.cjs, a file per command, the chunks they share). Node 20 keeps no
// compiled code between runs, so each file is compiled through node:vm with V8's code cache: the
// first run of a build writes a cache beside each file it loaded, and the next runs skip most of
// the compiling (docs/benchmarks.md). A cache is only a shortcut: missing, unreadable, made from
// another text or refused by V8 (another Node version or flags), the file compiles as it would
// without it; a folder this process cannot write to (an installed package owned by root) keeps
// none.
import { accessSync, constants, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { cachedDataVersionTag } from 'node:v8';
import { Script } from 'node:vm';

/**
 * Every file loaded, by path: test/helpers/load-trace.mjs lists them as Node's own loaders' files.
 */
export const LOADED_FILES = Symbol.for('learner-transfer.loaded-files');

/** The first line of each file the build writes, with a hash of the rest (scripts/compile.mjs). */
export const BUILD_MARK = '// learner-transfer build ';

/**
 * When a process that runs on writes the caches of what it loaded so far (its exit writes the
 * rest).
 */
const WRITE_AFTER_MS = 5_000;

interface Loaded {
  module: { exports: unknown };
  script: Script;
  /**
   * Its cache's first line: the file's first line (the build's hash of it) and length. V8 itself
   * checks a cache against the length of the source alone.
   */
  stamp: string | undefined;
  /** Its cache was used, or written, or cannot be: nothing to write. */
  cached: boolean;
}

const loaded = new Map<string, Loaded>();
(globalThis as Record<symbol, unknown>)[LOADED_FILES] = loaded;

/**
 * V8's own tag of the caches it accepts (its version, flags and CPU): a process started with
 * other flags (NODE_OPTIONS=--max-old-space-size=...) keeps caches of its own beside these.
 */
const RUNTIME = cachedDataVersionTag().toString(16);

/** Where the cache of `file` is, for this Node and these flags. */
export function cacheFileOf(file: string): string {
  return `${file}.${RUNTIME}.cache`;
}

/** The cache of `file` if it was made from this very text, else undefined. */
function readCache(file: string, stamp: string): Buffer | undefined {
  let data: Buffer;
  try {
    data = readFileSync(cacheFileOf(file));
  } catch {
    return undefined;
  }
  const end = data.indexOf(10);
  if (end < 0 || data.toString('latin1', 0, end) !== stamp) return undefined;
  return data.subarray(end + 1);
}

/** Whether this process may write in `dir` (asked once a folder: a root-owned package is not). */
const writable = new Map<string, boolean>();
function mayWriteIn(dir: string): boolean {
  let yes = writable.get(dir);
  if (yes === undefined) {
    try {
      accessSync(dir, constants.W_OK);
      yes = true;
    } catch {
      yes = false;
    }
    writable.set(dir, yes);
  }
  return yes;
}

/** Writes the cache of each file loaded that has none yet, where this process may write. */
export function writeCaches(): void {
  for (const [file, entry] of loaded) {
    if (entry.cached || entry.stamp === undefined) continue;
    entry.cached = true;
    if (!mayWriteIn(dirname(file))) continue;
    const temp = `${cacheFileOf(file)}.${process.pid}-${Math.random().toString(36).slice(2)}.tmp`;
    try {
      const data = Buffer.concat([
        Buffer.from(`${entry.stamp}\n`, 'latin1'),
        entry.script.createCachedData(),
      ]);
      // A new file of its own (not through a link), readable by all, writable by its owner alone: a
      // cache is code.
      writeFileSync(temp, data, { mode: 0o644, flag: 'wx' });
      // Whole or not at all: another process may be reading it.
      renameSync(temp, cacheFileOf(file));
    } catch {
      // full, or gone: the cache is a shortcut, not a need
      try {
        unlinkSync(temp);
      } catch {
        // never written
      }
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
 * Node's require for the files of `dir` (packages, node:): one a folder, not one a file (a build has
 * three folders of code).
 */
const nodeRequires = new Map<string, NodeJS.Require>();
function nodeRequireIn(dir: string): NodeJS.Require {
  let found = nodeRequires.get(dir);
  if (!found) {
    found = createRequire(`${dir}/`);
    nodeRequires.set(dir, found);
  }
  return found;
}

/** The stamp of a file the build wrote (its first line and its length), else undefined. */
function stampOf(source: string): string | undefined {
  const end = source.indexOf('\n');
  return source.startsWith(BUILD_MARK) && end > 0 ? `${source.slice(0, end)} ${source.length}` : undefined;
}

/**
 * Loads the CommonJS file `file` (an absolute path) once and returns its exports. Its relative
 * requires are files of the same build, loaded the same way; the others are Node's (packages,
 * node:). It runs in strict mode, as the ES modules it was compiled from.
 */
export function loadBundle(file: string): unknown {
  const known = loaded.get(file);
  if (known) return known.module.exports;
  const source = readFileSync(file, 'utf8');
  const stamp = stampOf(source);
  const cachedData = stamp === undefined ? undefined : readCache(file, stamp);
  // On the first line, so that the file's line numbers are the stack's.
  const script = new Script(
    `(function (exports, require, module, __filename, __dirname, __ltUrl) {"use strict";${source}\n})`,
    { filename: file, ...(cachedData ? { cachedData } : {}) },
  );
  const entry: Loaded = {
    module: { exports: {} },
    script,
    stamp,
    cached: cachedData !== undefined && !script.cachedDataRejected,
  };
  loaded.set(file, entry);
  if (!entry.cached && stamp !== undefined) scheduleWrite();
  const nodeRequire = nodeRequireIn(dirname(file));
  const own = (id: string) => (id.startsWith('.') ? loadBundle(resolve(dirname(file), id)) : nodeRequire(id));
  const requireFn = Object.assign(own, { resolve: nodeRequire.resolve, cache: nodeRequire.cache });
  const run = script.runInThisContext() as (...args: unknown[]) => void;
  try {
    run.call(
      entry.module.exports,
      entry.module.exports,
      requireFn,
      entry.module,
      file,
      dirname(file),
      pathToFileURL(file).href,
    );
  } catch (err) {
    // As Node's require: a file that threw is not kept half-loaded.
    loaded.delete(file);
    throw err;
  }
  return entry.module.exports;
}
