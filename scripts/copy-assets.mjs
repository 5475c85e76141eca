// A compiled tree needs, beside the JavaScript that reads them, the Lua scripts (and the parts in
// their includes/ folders) and the dashboard's browser files (every file under a public/ folder):
// no compiler copies them. scripts/compile.mjs calls this after compiling.
import { cpSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';

/** Copies the Lua scripts and the public/ files of `src` to the same places under `out`. */
export function copyAssets(src, out, dir = src, inPublic = false) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) copyAssets(src, out, path, inPublic || name === 'public');
    else if (inPublic || name.endsWith('.lua')) {
      const target = join(out, relative(src, path));
      mkdirSync(dirname(target), { recursive: true });
      cpSync(path, target);
    }
  }
}
