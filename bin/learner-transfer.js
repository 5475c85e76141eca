#!/usr/bin/env node
// The CLI entry: compiled JavaScript wherever it runs. An installed package and the Docker image
// have dist/ (npm run build) and no src/: they run it. A checkout has src/: it runs a build of its
// own sources, made on the first start after they change (scripts/checkout-build.mjs), so it never
// runs a stale build and a fresh clone works after `npm ci` alone.
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { dirname, join } from 'node:path';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
if (existsSync(join(root, 'src', 'cli', 'main.ts'))) {
  const { checkoutEntry } = await import(pathToFileURL(join(root, 'scripts', 'checkout-build.mjs')).href);
  await import(await checkoutEntry(root));
} else {
  await import(pathToFileURL(join(root, 'dist', 'cli', 'main.js')).href);
}
