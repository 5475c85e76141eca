// Compiles src/ into a tree of JavaScript, file for file: esbuild (what tsx itself runs) with no
// bundling, so every module keeps its own import.meta.url and finds its Lua scripts and public/
// files, copied beside it (scripts/copy-assets.mjs). `npm run build` makes dist/ with it
// (scripts/build.mjs), and a checkout's binary its own build (scripts/checkout-build.mjs). esbuild
// is a dev dependency: an installed package runs the dist/ it was packed with and never compiles.
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
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

/**
 * cli/main.js as one file: the entry and the command table, all they import statically (our modules;
 * packages stay imports), so that `--help` reads one file of ours, not forty. The table's dynamic
 * imports (a command's own file, the configuration, the context) stay imports of the compiled files
 * beside it, which hold everything else. The table's modules that a command's file imports too (the
 * flag parsers' helpers in core/) are then loaded twice, as two copies: they hold no state and no class
 * that a command checks with instanceof (a command's errors are its own copy's, said by shared.ts).
 */
async function bundleEntry(src, out) {
  const cli = resolve(src, 'cli');
  await build({
    entryPoints: [join(src, 'cli', 'main.ts')],
    outfile: join(out, 'cli', 'main.js'),
    bundle: true,
    packages: 'external',
    format: 'esm',
    platform: 'node',
    target: 'node20',
    logLevel: 'silent',
    plugins: [
      {
        name: 'lazy-imports',
        setup(b) {
          b.onResolve({ filter: /^\./ }, (args) => {
            if (args.kind !== 'dynamic-import') return undefined;
            const path = relative(cli, resolve(dirname(args.importer), args.path))
              .split(sep)
              .join('/')
              .replace(/\.ts$/, '.js');
            return { path: path.startsWith('.') ? path : `./${path}`, external: true };
          });
        },
      },
    ],
  });
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
  await bundleEntry(src, out);
  copyAssets(src, out);
}
