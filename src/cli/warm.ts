// `node cli/warm.cjs` in a build (scripts/compile.mjs builds it): writes the code cache of every
// file of the build, for one no process may write to, such as the Docker image's dist/
// (Dockerfile), whose commands would otherwise start without one (bundle-loader.ts). Loading a
// file runs the top level of its modules, which starts nothing; the command table runs
// `--version`.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { loadBundle, writeCaches } from './bundle-loader.ts';

const out = join(__dirname, '..');
const files = ['vendor', 'chunks', 'cli'].flatMap((dir) =>
  readdirSync(join(out, dir))
    .filter((name) => /^[\w-]+\.cjs$/.test(name) && !['start.cjs', 'warm.cjs', 'main.cjs'].includes(name))
    .map((name) => join(out, dir, name)),
);
for (const file of files) loadBundle(file);
process.argv.splice(2, Infinity, '--version');
loadBundle(join(out, 'cli', 'main.cjs'));
// After the table's run: it is a promise (main.ts).
setImmediate(() => {
  writeCaches();
  process.stdout.write(`code cache written for ${files.length + 1} files of ${out}\n`);
  process.exit(0);
});
