#!/usr/bin/env node
// The CLI entry. In a checkout the TypeScript sources run through tsx, so a fresh clone works after
// `npm ci` alone and never runs a stale build; an installed image without src/ runs the compiled dist/.
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { dirname, join } from 'node:path';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const source = join(root, 'src', 'cli', 'main.ts');
if (existsSync(source)) {
  const { register } = await import('tsx/esm/api');
  register();
  await import(pathToFileURL(source).href);
} else {
  await import(pathToFileURL(join(root, 'dist', 'cli', 'main.js')).href);
}
