#!/usr/bin/env node
// Runs a TypeScript entry point through tsx, so `npm run demo` works on a fresh clone with no build step.
// CommonJS, as all of bin/ (bin/package.json): see learner-transfer.js.
const { pathToFileURL } = require('node:url');
const { resolve } = require('node:path');

const entry = process.argv[2];
if (!entry) {
  process.stderr.write('usage: run-ts.js FILE.ts [args...]\n');
  process.exit(2);
}
// The entry takes this script's place in argv, as if node had run it: process.argv[1] is the entry.
process.argv.splice(1, 2, resolve(entry));
// tsx's ES module API (its CommonJS one resolves its hooks wrongly from here).
void import('tsx/esm/api').then(({ register }) => {
  register();
  return import(pathToFileURL(resolve(entry)).href);
});
