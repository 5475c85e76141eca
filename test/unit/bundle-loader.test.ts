// The build's loader (src/cli/bundle-loader.ts), on CommonJS files written here: a file and what it
// requires load once each, a cache is written beside each, used by the next process (a fresh copy of
// the module stands for it), and never for a file that changed since, nor when V8 refuses it.
import { mkdirSync, mkdtempSync, readFileSync, statSync, utimesSync, writeFileSync } from 'node:fs';
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

function build(): { dir: string; main: string; part: string } {
  const dir = mkdtempSync(join(tmpdir(), 'lt-bundle-loader-'));
  mkdirSync(join(dir, 'cli'));
  mkdirSync(join(dir, 'chunks'));
  const part = join(dir, 'chunks', 'part.cjs');
  writeFileSync(part, 'exports.loads = (exports.loads ?? 0) + 1;\nexports.word = "first";\n');
  const main = join(dir, 'cli', 'main.cjs');
  writeFileSync(
    main,
    [
      'const part = require("../chunks/part.cjs");',
      'const again = require("../chunks/part.cjs");',
      'const { join } = require("node:path");',
      'module.exports = { word: part.word, same: part === again, url: __ltUrl, file: __filename, joined: join("a", "b") };',
    ].join('\n'),
  );
  return { dir, main, part };
}

describe('the bundle loader', () => {
  it('loads a file and what it requires once, with its own address, and lists them', async () => {
    const { main, part } = build();
    const loader = await freshLoader();
    const exports = loader.loadBundle(main) as Record<string, unknown>;
    expect(exports).toEqual({
      word: 'first',
      same: true,
      url: pathToFileURL(main).href,
      file: main,
      joined: join('a', 'b'),
    });
    expect(loader.loadBundle(main)).toBe(exports);
    expect((loader.loadBundle(part) as { loads: number }).loads).toBe(1);
    expect([...loader.entries.keys()]).toEqual([main, part]);
  });

  it('writes a cache beside each file, which the next process uses', async () => {
    const { main, part } = build();
    const first = await freshLoader();
    first.loadBundle(main);
    expect(first.entries.get(main)?.cached).toBe(false);
    first.writeCaches();
    for (const file of [main, part]) {
      const cache = readFileSync(`${file}.cache`);
      const { size, mtimeMs } = statSync(file);
      expect(cache.toString('latin1', 0, cache.indexOf(10))).toBe(`${size}:${mtimeMs}`);
      expect(cache.length).toBeGreaterThan(cache.indexOf(10) + 1);
    }
    const next = await freshLoader();
    expect((next.loadBundle(main) as { word: string }).word).toBe('first');
    expect(next.entries.get(main)?.cached).toBe(true);
    expect(next.entries.get(part)?.cached).toBe(true);
  });

  it('never uses the cache of a file that changed since, even at the same size', async () => {
    const { main, part } = build();
    const first = await freshLoader();
    first.loadBundle(main);
    first.writeCaches();
    // Same length, other content, another modification time: the cache must not stand for it.
    writeFileSync(part, readFileSync(part, 'utf8').replace('"first"', '"other"'));
    const later = new Date(statSync(part).mtimeMs + 5_000);
    utimesSync(part, later, later);
    const next = await freshLoader();
    expect((next.loadBundle(main) as { word: string }).word).toBe('other');
    expect(next.entries.get(part)?.cached).toBe(false);
    expect(next.entries.get(main)?.cached).toBe(true);
  });

  it('compiles as without a cache when V8 refuses it, and a cache it cannot write is none', async () => {
    const { main, part } = build();
    const { size, mtimeMs } = statSync(part);
    writeFileSync(`${part}.cache`, Buffer.concat([Buffer.from(`${size}:${mtimeMs}\n`), Buffer.alloc(64, 7)]));
    // A folder where the cache of main would go: its rename fails.
    mkdirSync(`${main}.cache`);
    const loader = await freshLoader();
    expect((loader.loadBundle(main) as { word: string }).word).toBe('first');
    expect(loader.entries.get(part)?.cached).toBe(false);
    expect(() => loader.writeCaches()).not.toThrow();
    expect(statSync(`${main}.cache`).isDirectory()).toBe(true);
    // The refused cache was replaced by a good one.
    const next = await freshLoader();
    next.loadBundle(part);
    expect(next.entries.get(part)?.cached).toBe(true);
  });
});
