// The CLI the tests spawn, compiled once per run into .test-cli/ by the compiler `npm run build` uses for
// dist/ (scripts/compile.mjs: the same bundle and chunks), so a spawned CLI runs JavaScript as
// a user's does, not the sources through tsx (about twice the CPU: `--help` 3.5 CPU-s through tsx, 1.7
// from JavaScript; the suite spawns a few hundred). Rebuilt whenever a source changed (a stamp of their
// content), so a test never runs a stale build; outside vitest (npm run faults) nothing sets LT_TEST_CLI
// and the binary runs as a user's does. Spawned CLIs add nothing to coverage: it is taken in the workers.
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { compileTree, META_FILE, packageOf as packageName } from '../../scripts/compile.mjs';

const ROOT = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
/** One level under the root, as dist/ is: src/cli/demo.ts finds ../../jobs.example.csv from either. */
export const TEST_CLI_DIR = join(ROOT, '.test-cli');
export const TEST_CLI_MAIN = join(TEST_CLI_DIR, 'cli', 'start.cjs');
const STAMP = '.stamp';

function sourceFiles(dir: string, found: string[] = []): string[] {
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) sourceFiles(path, found);
    else found.push(path);
  }
  return found;
}

/**
 * Compiles src/ into .test-cli/ unless it holds this very source already; returns the entry to spawn.
 * Every project's globalSetup asks, in one process: they share one build.
 */
export function buildTestCli(): Promise<string> {
  const shared = globalThis as { ltTestCli?: Promise<string> };
  shared.ltTestCli ??= buildOnce();
  return shared.ltTestCli;
}

async function buildOnce(): Promise<string> {
  const src = join(ROOT, 'src');
  // The sources and the compiler's own scripts: a change to either makes a new build.
  const scripts = ['compile.mjs', 'copy-assets.mjs'].map((f) => join(ROOT, 'scripts', f));
  // The libraries are compiled in: other versions installed are a new build.
  const files = [...sourceFiles(src), ...scripts, join(ROOT, 'package-lock.json')];
  const hash = createHash('sha256');
  for (const file of files) hash.update(`${relative(src, file)}\0`).update(readFileSync(file));
  const stamp = hash.digest('hex');
  const stampFile = join(TEST_CLI_DIR, STAMP);
  if (existsSync(stampFile) && readFileSync(stampFile, 'utf8') === stamp) return TEST_CLI_MAIN;
  // Built beside and renamed into place, so that another run in this checkout never spawns a half tree.
  const fresh = `${TEST_CLI_DIR}-${process.pid}-${randomBytes(4).toString('hex')}`;
  const old = `${fresh}-old`;
  await compileTree(src, fresh, { metafile: true });
  writeFileSync(join(fresh, STAMP), stamp);
  if (existsSync(TEST_CLI_DIR)) renameSync(TEST_CLI_DIR, old);
  renameSync(fresh, TEST_CLI_DIR);
  rmSync(old, { recursive: true, force: true });
  return TEST_CLI_MAIN;
}

/**
 * What the compiled files a process loaded hold (the build's meta file, esbuild's account of the bundle):
 * each as `src/...ts` or `node_modules/<package>/...`. A loaded file the build did not make (a package
 * left outside the bundle, read from node_modules) is given as it is, from node_modules/ on.
 */
export function builtInputs(loaded: readonly string[]): string[] {
  const meta = JSON.parse(readFileSync(join(TEST_CLI_DIR, META_FILE), 'utf8')) as {
    outputs: Record<string, { inputs: string[] }>;
  };
  const byFile = new Map(Object.entries(meta.outputs).map(([out, o]) => [join(TEST_CLI_DIR, out), o.inputs]));
  const inputs = new Set<string>();
  for (const file of loaded) {
    const held = byFile.get(file);
    if (held) for (const input of held) inputs.add(input);
    else {
      const at = file.lastIndexOf(`${sep}node_modules${sep}`);
      inputs.add(
        at >= 0
          ? file
              .slice(at + 1)
              .split(sep)
              .join('/')
          : relative(ROOT, file).split(sep).join('/'),
      );
    }
  }
  return [...inputs].sort();
}

/** The package a path under node_modules/ belongs to (`@scope/name` or `name`), else undefined. */
export function packageOf(input: string): string | undefined {
  const at = input.lastIndexOf('node_modules/');
  return at < 0 ? undefined : packageName(input.slice(at + 13));
}
