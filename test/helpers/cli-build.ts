// The CLI the tests spawn, compiled once per run. Through bin/learner-transfer.js a spawned CLI runs the
// TypeScript sources through tsx: each process pays tsx's loader for every module it imports, about twice
// the CPU of the same modules as JavaScript (measured: `--help` 3.5 CPU-s through tsx, 1.7 from
// JavaScript), and the suite spawns a few hundred. So vitest's globalSetup compiles src/ with esbuild (what
// tsx itself uses, file for file, no bundling: every module keeps its own import.meta.url, so the Lua
// scripts and the dashboard's files are found beside it) into .test-cli/, the tree `npm run build` makes
// in dist/, and spawnCli runs .test-cli/cli/main.js. It is rebuilt whenever a source changed (a stamp of
// their content), so a test never runs a stale build; outside vitest (npm run faults) nothing sets
// LT_TEST_CLI and the binary runs as a user's does. Spawned CLIs add nothing to coverage either way:
// coverage is taken in vitest's workers only.
import { build } from 'esbuild';
import { createHash, randomBytes } from 'node:crypto';
import {
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
/** One level under the root, as dist/ is: src/cli/demo.ts finds ../../jobs.example.csv from either. */
export const TEST_CLI_DIR = join(ROOT, '.test-cli');
export const TEST_CLI_MAIN = join(TEST_CLI_DIR, 'cli', 'main.js');
const STAMP = '.stamp';

function sourceFiles(dir: string, found: string[] = []): string[] {
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) sourceFiles(path, found);
    else found.push(path);
  }
  return found;
}

/** Relative imports name the .ts file (allowImportingTsExtensions); the compiled tree has .js files. */
function rewriteImports(code: string): string {
  return code
    .replace(/(\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)(["'])(\.\.?\/[^"']*)\.ts\2/g, '$1$2$3.js$2')
    .replace(/(\bimport\s*\(\s*)`(\.\.?\/[^`]*)\.ts`/g, '$1`$2.js`');
}

async function compile(files: string[], src: string, out: string): Promise<void> {
  const entryPoints = files.filter((f) => f.endsWith('.ts'));
  const result = await build({
    entryPoints,
    outdir: out,
    outbase: src,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    bundle: false,
    write: false,
    logLevel: 'silent',
  });
  for (const file of result.outputFiles) {
    mkdirSync(dirname(file.path), { recursive: true });
    writeFileSync(file.path, rewriteImports(file.text));
  }
  // What tsc does not compile, as scripts/copy-assets.mjs copies it for dist/: every other file of src/
  // (the Lua scripts, the dashboard's public/ files).
  for (const file of files.filter((f) => !f.endsWith('.ts'))) {
    const target = join(out, relative(src, file));
    mkdirSync(dirname(target), { recursive: true });
    cpSync(file, target);
  }
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
  const files = sourceFiles(src);
  const hash = createHash('sha256');
  for (const file of files) hash.update(`${relative(src, file)}\0`).update(readFileSync(file));
  const stamp = hash.digest('hex');
  const stampFile = join(TEST_CLI_DIR, STAMP);
  if (existsSync(stampFile) && readFileSync(stampFile, 'utf8') === stamp) return TEST_CLI_MAIN;
  // Built beside and renamed into place, so that another run in this checkout never spawns a half tree.
  const fresh = `${TEST_CLI_DIR}-${process.pid}-${randomBytes(4).toString('hex')}`;
  const old = `${fresh}-old`;
  await compile(files, src, fresh);
  writeFileSync(join(fresh, STAMP), stamp);
  if (existsSync(TEST_CLI_DIR)) renameSync(TEST_CLI_DIR, old);
  renameSync(fresh, TEST_CLI_DIR);
  rmSync(old, { recursive: true, force: true });
  return TEST_CLI_MAIN;
}
