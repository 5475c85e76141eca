// The compiled build needs, beside the JavaScript that reads them, the Lua scripts (and the parts in their
// includes/ folders) and the dashboard's browser files (every file under a public/ folder): tsc copies
// neither.
import { cpSync, readdirSync, statSync } from 'node:fs';
import { join, sep } from 'node:path';

function walk(dir, inPublic) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path, inPublic || name === 'public');
    else if (inPublic || name.endsWith('.lua')) cpSync(path, join('dist', path.slice(`src${sep}`.length)));
  }
}
walk('src', false);
