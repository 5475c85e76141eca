// Preloaded with `node --import` into a process under test: at its exit, writes to the file named
// by LT_LOAD_TRACE every module it loaded, one path (or node: name) a line. ES modules are seen by
// a loader hook (off-thread, so it appends as it goes), CommonJS ones from require's cache at
// exit: together, every file of ours and of node_modules that ran, whether imported or required
// inside a package. A build's own CommonJS files load through src/cli/bundle-loader.ts, not Node's
// loaders: its list of them is read at exit too.
import { appendFileSync } from 'node:fs';
import { createRequire, register } from 'node:module';

const out = process.env.LT_LOAD_TRACE;
if (!out) throw new Error('load-trace.mjs: set LT_LOAD_TRACE to the file to write');

const HOOKS = `
import { appendFileSync } from 'node:fs';
let out;
export function initialize(data) { out = data.out; }
export async function load(url, context, next) {
  appendFileSync(out, url + '\\n');
  return next(url, context);
}
`;
register(`data:text/javascript,${encodeURIComponent(HOOKS)}`, { data: { out } });

const require = createRequire(import.meta.url);
process.on('exit', () => {
  const own = new URL(import.meta.url).pathname;
  const bundles = globalThis[Symbol.for('learner-transfer.loaded-files')];
  const files = [...Object.keys(require.cache), ...(bundles ? bundles.keys() : [])].filter((f) => f !== own);
  appendFileSync(out, files.map((f) => `${f}\n`).join(''));
});
