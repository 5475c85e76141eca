// The compiled binary's entry (cli/start.cjs of a build, scripts/compile.mjs): the command table,
// cli/main.cjs beside it, loaded with the code cache (bundle-loader.ts). CommonJS, so that a start
// loads no ES module (bin/learner-transfer.js). From the sources, main.ts is the entry.
import { join } from 'node:path';
import { loadBundle } from './bundle-loader.ts';

loadBundle(join(__dirname, 'main.cjs'));
