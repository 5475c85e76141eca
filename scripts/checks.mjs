// The checks `npm test` makes before the tests: eslint, prettier and tsc, side by side (each is one
// process on one core: in a row they took 35 s on a 2-core machine, at once about 20 s). Each one's
// output is printed whole when it ends, under its command, so that outputs never interleave; the exit
// code is 1 if any failed. `npm run lint` and `npm run typecheck` still run them one by one.
import { Buffer } from 'node:buffer';
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const require = createRequire(import.meta.url);
/** The bin script of a package of node_modules (node runs it; no shell, no npx). */
function binOf(pkg, bin) {
  const manifest = require.resolve(`${pkg}/package.json`);
  const bins = require(manifest).bin;
  return join(dirname(manifest), typeof bins === 'string' ? bins : bins[bin]);
}

const CHECKS = [
  { name: 'eslint .', args: [binOf('eslint', 'eslint'), '.'] },
  { name: 'prettier --check .', args: [binOf('prettier', 'prettier'), '--check', '.'] },
  { name: 'tsc --noEmit -p .', args: [binOf('typescript', 'tsc'), '--noEmit', '-p', '.'] },
];

/** Runs one check; resolves with its exit code and everything it wrote. */
function run({ name, args }) {
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const chunks = [];
    child.stdout.on('data', (d) => chunks.push(d));
    child.stderr.on('data', (d) => chunks.push(d));
    child.on('error', (err) => resolve({ name, code: 1, output: `${err.message}\n`, ms: 0 }));
    child.on('close', (code, signal) =>
      resolve({
        name,
        code: code ?? 1,
        output: Buffer.concat(chunks).toString() + (signal ? `(ended by ${signal})\n` : ''),
        ms: Date.now() - started,
      }),
    );
  });
}

const results = await Promise.all(
  CHECKS.map((check) =>
    run(check).then((r) => {
      process.stdout.write(
        `\n> ${r.name}: ${r.code === 0 ? 'passed' : `FAILED (exit ${r.code})`} in ${(r.ms / 1000).toFixed(1)} s\n${r.output}`,
      );
      return r;
    }),
  ),
);
const failed = results.filter((r) => r.code !== 0).map((r) => r.name);
if (failed.length) process.stderr.write(`\nchecks failed: ${failed.join('; ')}\n`);
process.exitCode = failed.length ? 1 : 0;
