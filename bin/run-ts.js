#!/usr/bin/env node
// Runs a TypeScript entry point through tsx, so `npm run demo` works on a fresh clone with no build step.
import { register } from 'tsx/esm/api';
import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';

const entry = process.argv[2];
if (!entry) {
  process.stderr.write('usage: run-ts.js FILE.ts [args...]\n');
  process.exit(2);
}
// The entry takes this script's place in argv, as if node had run it: process.argv[1] is the entry.
process.argv.splice(1, 2, resolve(entry));
register();
await import(pathToFileURL(resolve(entry)).href);
