// The compiled binary's entry (cli/main.js of a build, scripts/compile.mjs): the command table,
// cli/main.cjs beside it, loaded with the code cache (bundle-loader.ts). From the sources, main.ts is
// the entry.
import { fileURLToPath } from 'node:url';
import { loadBundle } from './bundle-loader.ts';

loadBundle(fileURLToPath(new URL('./main.cjs', import.meta.url)));
