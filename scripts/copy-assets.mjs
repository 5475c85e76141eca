// The compiled build needs the Lua scripts (and the parts in their includes/ folders) beside the JavaScript
// that loads them.
import { cpSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

function walk(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path);
    else if (name.endsWith('.lua')) cpSync(path, join('dist', path.slice('src/'.length)));
  }
}
walk('src');
