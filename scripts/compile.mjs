// Compiles src/ into a tree of JavaScript, file for file: esbuild (what tsx itself runs) with no
// bundling, so every module keeps its own import.meta.url and finds its Lua scripts and public/
// files, copied beside it (scripts/copy-assets.mjs). `npm run build` makes dist/ with it
// (scripts/build.mjs), and a checkout's binary its own build (scripts/checkout-build.mjs). esbuild
// is a dev dependency: an installed package runs the dist/ it was packed with and never compiles.
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { build } from 'esbuild';
import { copyAssets } from './copy-assets.mjs';

/** Relative imports name the .ts file (allowImportingTsExtensions); the compiled tree has .js files. */
export function rewriteImports(code) {
  return code
    .replace(/(\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)(["'])(\.\.?\/[^"']*)\.ts\2/g, '$1$2$3.js$2')
    .replace(/(\bimport\s*\(\s*)`(\.\.?\/[^`]*)\.ts`/g, '$1`$2.js`');
}

function typeScriptFiles(dir) {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => join(e.parentPath, e.name))
    .sort();
}

/** Compiles every .ts file of `src` into `out` (made if missing) and copies the other files it needs. */
export async function compileTree(src, out) {
  const result = await build({
    entryPoints: typeScriptFiles(src),
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
  copyAssets(src, out);
}
