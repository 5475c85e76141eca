// The build's loader (src/cli/bundle-loader.ts), on CommonJS files written here as the build writes
// them (headed by a hash of their text): a file and what it requires load once each, in strict mode; a
// cache is written beside each, used by the next process (a fresh copy of the module stands for it),
// and never for another text of the file, nor when V8 refuses it; a file the build did not write keeps
// none.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it, vi } from 'vitest';

type LoaderModule = typeof import('../../src/cli/bundle-loader.ts');
interface Entry {
  cached: boolean;
}

/** A fresh copy of the loader, as a new process has: nothing loaded, no cache in use. */
async function freshLoader(): Promise<LoaderModule & { entries: Map<string, Entry> }> {
  vi.resetModules();
  const loader = await import('../../src/cli/bundle-loader.ts');
  const entries = (globalThis as Record<symbol, unknown>)[loader.LOADED_FILES] as Map<string, Entry>;
  return { ...loader, entries };
}

/** `text` as the build writes it (scripts/compile.mjs). */
function built(mark: string, text: string): string {
  return `${mark}${createHash('sha256').update(text).digest('hex').slice(0, 32)}\n${text}`;
}

async function build(): Promise<{ dir: string; main: string; part: string; mark: string }> {
  const { BUILD_MARK: mark } = await freshLoader();
  const dir = mkdtempSync(join(tmpdir(), 'lt-bundle-loader-'));
  mkdirSync(join(dir, 'cli'));
  mkdirSync(join(dir, 'chunks'));
  const part = join(dir, 'chunks', 'part.cjs');
  writeFileSync(part, built(mark, 'exports.loads = (exports.loads ?? 0) + 1;\nexports.word = "first";\n'));
  const main = join(dir, 'cli', 'main.cjs');
  const text = [
    'const part = require("../chunks/part.cjs");',
    'const again = require("../chunks/part.cjs");',
    'const { join } = require("node:path");',
    // Strict, as the ES modules it comes from: a plain call's `this` is undefined.
    'const strict = (function () { return this === undefined; })();',
    'module.exports = { word: part.word, same: part === again, url: __ltUrl, file: __filename, joined: join("a", "b"), strict };',
  ].join('\n');
  writeFileSync(main, built(mark, text));
  return { dir, main, part, mark };
}

describe('the bundle loader', () => {
  it('loads a file and what it requires once, in strict mode, with its own address, and lists them', async () => {
    const { main, part } = await build();
    const loader = await freshLoader();
    const exports = loader.loadBundle(main) as Record<string, unknown>;
    expect(exports).toEqual({
      word: 'first',
      same: true,
      url: pathToFileURL(main).href,
      file: main,
      joined: join('a', 'b'),
      strict: true,
    });
    expect(loader.loadBundle(main)).toBe(exports);
    expect((loader.loadBundle(part) as { loads: number }).loads).toBe(1);
    expect([...loader.entries.keys()]).toEqual([main, part]);
  });

  it('writes a cache beside each file, which the next process uses', async () => {
    const { main, part } = await build();
    const first = await freshLoader();
    first.loadBundle(main);
    expect(first.entries.get(main)?.cached).toBe(false);
    first.writeCaches();
    for (const file of [main, part]) {
      const cache = readFileSync(first.cacheFileOf(file));
      const text = readFileSync(file, 'utf8');
      // Headed by the file's own first line (its hash) and its length.
      expect(cache.toString('latin1', 0, cache.indexOf(10))).toBe(`${text.split('\n')[0]} ${text.length}`);
      expect(cache.length).toBeGreaterThan(cache.indexOf(10) + 1);
    }
    // Nothing left half-written.
    expect(readdirSync(join(main, '..')).filter((n) => n.endsWith('.tmp'))).toEqual([]);
    const next = await freshLoader();
    expect((next.loadBundle(main) as { word: string }).word).toBe('first');
    expect(next.entries.get(main)?.cached).toBe(true);
    expect(next.entries.get(part)?.cached).toBe(true);
  });

  it('never uses the cache of another text of the file, even of the same length', async () => {
    const { main, part, mark } = await build();
    const first = await freshLoader();
    first.loadBundle(main);
    first.writeCaches();
    // A new build of the same length (V8 would take the old cache for it: it checks the length alone).
    const text = readFileSync(part, 'utf8').split('\n').slice(1).join('\n');
    writeFileSync(part, built(mark, text.replace('"first"', '"other"')));
    const next = await freshLoader();
    expect((next.loadBundle(main) as { word: string }).word).toBe('other');
    expect(next.entries.get(part)?.cached).toBe(false);
    expect(next.entries.get(main)?.cached).toBe(true);
  });

  it('compiles as without a cache when V8 refuses it, and leaves nothing where it cannot write', async () => {
    const { main, part } = await build();
    const probe = await freshLoader();
    const text = readFileSync(part, 'utf8');
    writeFileSync(
      probe.cacheFileOf(part),
      Buffer.concat([Buffer.from(`${text.split('\n')[0]} ${text.length}\n`), Buffer.alloc(64, 7)]),
    );
    // A folder where the cache of main would go: its rename fails.
    mkdirSync(probe.cacheFileOf(main));
    const loader = await freshLoader();
    expect((loader.loadBundle(main) as { word: string }).word).toBe('first');
    expect(loader.entries.get(part)?.cached).toBe(false);
    expect(() => loader.writeCaches()).not.toThrow();
    expect(readdirSync(join(main, '..')).filter((n) => n.endsWith('.tmp'))).toEqual([]);
    // The refused cache was replaced by a good one.
    const next = await freshLoader();
    next.loadBundle(part);
    expect(next.entries.get(part)?.cached).toBe(true);
  });

  it('keeps no cache of a file the build did not write, and forgets a file that threw', async () => {
    const { dir } = await build();
    const plain = join(dir, 'chunks', 'plain.cjs');
    writeFileSync(plain, 'module.exports = 7;\n');
    const throws = join(dir, 'chunks', 'throws.cjs');
    writeFileSync(throws, 'exports.half = true;\nthrow new Error("no");\n');
    const loader = await freshLoader();
    expect(loader.loadBundle(plain)).toBe(7);
    expect(() => loader.loadBundle(throws)).toThrow('no');
    expect(loader.entries.has(throws)).toBe(false);
    expect(() => loader.loadBundle(throws)).toThrow('no');
    loader.writeCaches();
    expect(existsSync(loader.cacheFileOf(plain))).toBe(false);
  });
});
