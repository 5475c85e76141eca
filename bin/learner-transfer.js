#!/usr/bin/env node
// The CLI entry: compiled JavaScript wherever it runs. An installed package and the Docker image
// have dist/ (npm run build) and no src/: they run it. A checkout has src/: it runs a build of its
// own sources, made on the first start after they change (scripts/checkout-build.cjs), so it never
// runs a stale build and a fresh clone works after `npm ci` alone. CommonJS (bin/package.json), as
// what it loads: a start that loads no ES module skips Node's ES module loader (about 10 ms).
const { existsSync } = require('node:fs');
const { join } = require('node:path');

const root = join(__dirname, '..');
if (existsSync(join(root, 'src', 'cli', 'main.ts'))) {
  require(join(root, 'scripts', 'checkout-build.cjs')).startCheckout(root);
} else {
  require(join(root, 'dist', 'cli', 'start.cjs'));
}
