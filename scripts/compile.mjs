// Compiles src/ into what the binary runs. cli/main.cjs is the command table as one file, so
// `--help` reads one file of ours and commander (vendor/commander.cjs, one copy for the table and the
// commands' flag parsers). What the table imports when a command runs (its own file, the
// configuration, the context) is one esbuild bundle split at each of them: each is a file in cli/ with
// what it alone uses, and what two of them share is a chunk in chunks/, so every module is loaded once
// by a command. The libraries are bundled in too, but for the dashboard's board (@bull-board serves
// files from its own package folder) and OpenTelemetry (loaded only when tracing is on): a command
// reads a few files, not hundreds. esbuild splits ES modules only; each file is then rewritten as
// CommonJS (a module per file, the same graph), because Node 20 keeps compiled code between runs only
// where a program hands V8's code cache to node:vm, which runs scripts, not modules: cli/start.cjs,
// the entry (src/cli/start.ts), loads them with that code cache (src/cli/bundle-loader.ts;
// bench/cli-start.ts). The Lua scripts and the dashboard's public/ files are copied to their src/
// places under `out` (scripts/copy-assets.mjs); a module that finds them from its own address reads
// the address its source had (`import.meta.url` is rewritten to it, below). `npm run build` makes
// dist/ with it (scripts/build.mjs), a checkout's binary its own build (scripts/checkout-build.cjs),
// the tests theirs (test/helpers/cli-build.ts). esbuild is a dev dependency: an installed package runs
// the dist/ it was packed with and never compiles.
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { build, transform } from 'esbuild';
import { copyAssets } from './copy-assets.mjs';

/** Packages left out of the bundles: read from node_modules when (and if) a command imports them. */
const EXTERNAL_PACKAGES = ['@bull-board/', '@opentelemetry/', 'commander'];

/**
 * Commander, which the table and the commands' flag parsers share (one copy: run() tells its errors by
 * instanceof), is a file of the build of its own, loaded as the others are, with the code cache.
 */
const VENDOR = { commander: 'vendor/commander.cjs' };

/** The package a bare import (or a path under node_modules/) names: `@scope/name` or `name`. */
export function packageOf(specifier) {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0];
}

/**
 * Every file sits one folder under `out` (cli/main.cjs, chunks/*.cjs), so a module compiled from
 * src/limiter/scripts.ts finds its Lua at ../limiter/ from wherever its code landed.
 */
function ownAddress(src) {
  return {
    name: 'own-address',
    setup(b) {
      b.onLoad({ filter: /\.ts$/ }, (args) => {
        // Read once here for every source: returning nothing would make esbuild read it again.
        const code = readFileSync(args.path, 'utf8');
        if (!code.includes('import.meta.url')) return { contents: code, loader: 'ts' };
        const rel = relative(src, args.path).split(sep).join('/').replace(/\.ts$/, '.js');
        const address = `new URL(${JSON.stringify(`../${rel}`)}, import.meta.url).href`;
        return { contents: code.replaceAll('import.meta.url', address), loader: 'ts' };
      });
    },
  };
}

const external = {
  name: 'external-packages',
  setup(b) {
    b.onResolve({ filter: /^[^./]/ }, (args) => {
      if (args.path.startsWith('node:')) return { external: true };
      const name = packageOf(args.path);
      if (EXTERNAL_PACKAGES.some((p) => (p.endsWith('/') ? name.startsWith(p) : name === p))) {
        return { external: true };
      }
      return undefined;
    });
  },
};

/** The file a build with `metafile` writes in `out`: which sources and packages each output holds. */
export const META_FILE = 'meta.json';

const COMMON = {
  format: 'esm',
  platform: 'node',
  target: 'node20',
  legalComments: 'none',
  logLevel: 'silent',
};

/** Where a dynamic import of the table names its target until the commands' bundle says its file. */
const LAZY = '__lt_lazy__:';

/**
 * An ES module of the bundle as CommonJS: imports become requires (dynamic ones too, so that a chunk
 * loaded later goes through bundle-loader.ts as well), exports `module.exports`, and `import.meta.url`
 * the file's own address, which the loader passes in as `__ltUrl`.
 */
async function asCommonJs(code) {
  const result = await transform(code, {
    ...COMMON,
    format: 'cjs',
    loader: 'js',
    supported: { 'dynamic-import': false },
    define: { 'import.meta.url': '__ltUrl' },
  });
  let text = result.code;
  for (const [name, file] of Object.entries(VENDOR)) {
    text = text.replaceAll(`require("${name}")`, `require(${JSON.stringify(`../${file}`)})`);
    if (text.includes(`require("${name}/`)) throw new Error(`compile: a require of ${name}/... is left`);
  }
  return marked(text);
}

/**
 * `text` headed by the line bundle-loader.ts (BUILD_MARK) takes for a hash of it: a cache is used only
 * for the very text it was made from (V8 checks the length alone).
 */
function marked(text) {
  return `// learner-transfer build ${createHash('sha256').update(text).digest('hex').slice(0, 32)}\n${text}`;
}

/** Each package of VENDOR as one CommonJS file, and what it holds. */
async function bundleVendor(project) {
  return Promise.all(
    Object.entries(VENDOR).map(async ([name, file]) => {
      const result = await build({
        ...COMMON,
        format: 'cjs',
        absWorkingDir: project,
        stdin: { contents: `module.exports = require(${JSON.stringify(name)});`, resolveDir: project },
        outfile: file,
        bundle: true,
        write: false,
        metafile: true,
      });
      const inputs = Object.values(result.metafile.outputs).flatMap((o) => Object.keys(o.inputs));
      const text = result.outputFiles[0]?.text;
      return { file, text: text && marked(text), inputs: inputs.filter((i) => i !== '<stdin>') };
    }),
  );
}

/**
 * cli/main.cjs as one file: the command table, all it imports statically (our modules; packages,
 * commander alone, stay requires), so that `--help` reads one file of ours. Its dynamic imports (a
 * command's own file, the configuration, the context) are returned, to be the entries of the commands'
 * bundle; the text names them by LAZY until then. The table's modules that a command imports too (the
 * flag parsers' helpers in core/) are then loaded twice, as two copies: they hold no state and no class
 * that a command checks with instanceof (a command's errors are its own copy's, said by shared.ts).
 */
async function bundleTable(root, project) {
  const lazy = new Set();
  const result = await build({
    ...COMMON,
    absWorkingDir: project,
    entryPoints: [join(root, 'cli', 'main.ts')],
    outfile: 'main.js',
    bundle: true,
    packages: 'external',
    write: false,
    metafile: true,
    plugins: [
      {
        name: 'lazy-imports',
        setup(b) {
          b.onResolve({ filter: /^\./ }, (args) => {
            if (args.kind !== 'dynamic-import') return undefined;
            const target = resolve(args.resolveDir, args.path);
            lazy.add(target);
            return { path: `${LAZY}${target}`, external: true };
          });
        },
      },
      ownAddress(root),
    ],
  });
  const text = result.outputFiles.find((f) => f.path.endsWith('.js'))?.text ?? '';
  const inputs = Object.values(result.metafile.outputs).flatMap((o) => Object.keys(o.inputs));
  return { text, lazy: [...lazy].sort(), inputs };
}

/**
 * An entry of Node's built-ins alone: cli/start.cjs, which loads cli/main.cjs (src/cli/start.ts), or
 * cli/warm.cjs, which writes the code cache of every file (src/cli/warm.ts).
 */
async function bundleEntry(root, project, name) {
  const result = await build({
    ...COMMON,
    format: 'cjs',
    absWorkingDir: project,
    entryPoints: [join(root, 'cli', `${name}.ts`)],
    outfile: `${name}.cjs`,
    bundle: true,
    write: false,
    metafile: true,
  });
  const text = result.outputFiles.find((f) => f.path.endsWith('.cjs'))?.text ?? '';
  const inputs = Object.values(result.metafile.outputs).flatMap((o) => Object.keys(o.inputs));
  return { text, inputs };
}

/** The commands' bundle: a file in cli/ for each of `entries`, the code they share in chunks/. */
async function bundleCommands(root, project, out, entries) {
  const result = await build({
    ...COMMON,
    absWorkingDir: project,
    entryPoints: entries,
    outdir: resolve(out),
    entryNames: 'cli/[name]-[hash]',
    chunkNames: 'chunks/[name]-[hash]',
    outExtension: { '.js': '.cjs' },
    bundle: true,
    splitting: true,
    write: false,
    metafile: true,
    plugins: [external, ownAddress(root)],
  });
  // Each output, as `out` names it (a command: a file of cli/ named after it and a hash), and its sources.
  const outputs = Object.entries(result.metafile.outputs).map(([file, o]) => ({
    file: relative(resolve(out), resolve(project, file)).split(sep).join('/'),
    entry: o.entryPoint ? resolve(project, o.entryPoint) : undefined,
    inputs: Object.keys(o.inputs),
  }));
  const texts = new Map(
    result.outputFiles.map((f) => [relative(resolve(out), f.path).split(sep).join('/'), f.text]),
  );
  return { outputs, texts };
}

/**
 * Compiles `src` into `out` (made if missing) and copies the files it reads. With `metafile`, also
 * writes META_FILE (the tests of what a command loads read it).
 */
export async function compileTree(src, out, { metafile = false } = {}) {
  const root = resolve(src);
  const project = dirname(root);
  const table = await bundleTable(root, project);
  const entry = await bundleEntry(root, project, 'start');
  const warm = await bundleEntry(root, project, 'warm');
  const commands = await bundleCommands(root, project, out, table.lazy);
  const vendor = await bundleVendor(project);
  const lazy = new RegExp(`(["'\`])${LAZY}([^"'\`]+)\\1`, 'g');
  const main = table.text.replaceAll(lazy, (_, quote, target) => {
    const output = commands.outputs.find((o) => o.entry === target);
    if (!output) throw new Error(`compile: no output for ${target}`);
    return `${quote}../${output.file}${quote}`;
  });
  const files = [
    ['cli/start.cjs', entry.text],
    ['cli/warm.cjs', warm.text],
    ['cli/main.cjs', await asCommonJs(main)],
    ...vendor.map((v) => [v.file, v.text]),
    ...(await Promise.all([...commands.texts].map(async ([file, text]) => [file, await asCommonJs(text)]))),
  ];
  for (const [file, text] of files) {
    if (!text) throw new Error(`compile: ${file} came out empty`);
    mkdirSync(dirname(join(out, file)), { recursive: true });
    writeFileSync(join(out, file), text);
  }
  if (metafile) {
    const all = [
      ...commands.outputs.map((o) => [o.file, { inputs: o.inputs }]),
      ['cli/main.cjs', { inputs: table.inputs }],
      ['cli/start.cjs', { inputs: entry.inputs }],
      ['cli/warm.cjs', { inputs: warm.inputs }],
      ...vendor.map((v) => [v.file, { inputs: v.inputs }]),
    ];
    writeFileSync(join(out, META_FILE), JSON.stringify({ outputs: Object.fromEntries(all) }));
  }
  copyAssets(src, out);
}
