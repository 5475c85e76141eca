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
process.argv.splice(2, 1);
register();
await import(pathToFileURL(resolve(entry)).href);
