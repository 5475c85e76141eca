// `npm run build`: the compiled tree dist/ (scripts/compile.mjs), what the package and the Docker
// image run. Built beside and renamed into place, so that dist/ is never half a build.
import { existsSync, renameSync, rmSync } from 'node:fs';
import { compileTree } from './compile.mjs';

const fresh = `dist-${process.pid}.tmp`;
rmSync(fresh, { recursive: true, force: true });
await compileTree('src', fresh);
const old = `${fresh}-old`;
if (existsSync('dist')) renameSync('dist', old);
renameSync(fresh, 'dist');
rmSync(old, { recursive: true, force: true });
