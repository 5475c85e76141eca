// What bin/learner-transfer.js runs in a checkout (a tree with src/): a build of these very sources,
// made when they change. Each build lives in node_modules/.cache/learner-transfer/<fingerprint>/,
// the fingerprint hashing the path, size and modification time of every file of src/ and of what
// compiles it (tsconfig.json, package-lock.json, scripts/compile.mjs and copy-assets.mjs): an edit, a new or removed
// file, another branch checked out changes it. A start whose build exists walks src/ (a few
// milliseconds) and compiles nothing. A missing build is compiled beside and renamed into place
// whole, so no process runs half a build, and two starts at once end on one. Of the builds before
// it, the newest stays and the others go. Without esbuild (dev dependencies not installed) or a
// place to write, the sources run through tsx, as they are. CommonJS, as bin/learner-transfer.js:
// a start that loads no ES module skips Node's ES module loader (about 10 ms).
const { existsSync, readdirSync, renameSync, rmSync, statSync } = require('node:fs');
const { join } = require('node:path');
const { pathToFileURL } = require('node:url');

/** A build other than the newest two is removed once this old (younger, it may be a start in progress). */
const PRUNE_AFTER_MS = 60_000;

/** Two 32-bit FNV-1a hashes of `text`, 16 hex digits (node:crypto costs more to load than this). */
function fnv64(text) {
  let a = 0x811c9dc5;
  let b = 0x050c5d1f;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x01000193) ^ (b >>> 15);
  }
  return (a >>> 0).toString(16).padStart(8, '0') + (b >>> 0).toString(16).padStart(8, '0');
}

/** The fingerprint of what a build is made from. */
function sourceFingerprint(root) {
  const files = readdirSync(join(root, 'src'), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name));
  // package-lock.json: the libraries are compiled in (npm ci of other versions is a new build).
  for (const file of ['tsconfig.json', 'package-lock.json', 'scripts/compile.mjs', 'scripts/copy-assets.mjs'])
    files.push(join(root, file));
  let manifest = '';
  for (const file of files.sort()) {
    // A file that is not there (a checkout without package-lock.json) counts as such.
    const s = statSync(file, { throwIfNoEntry: false });
    manifest += s ? `${file}\0${s.size}\0${s.mtimeMs}\n` : `${file}\0-\n`;
  }
  return fnv64(manifest);
}

/** Removes the builds but `keep` and the newest other one, once they are older than PRUNE_AFTER_MS. */
function prune(cache, keep) {
  const others = readdirSync(cache)
    .filter((name) => name !== keep)
    .map((name) => ({ name, mtime: statSync(join(cache, name)).mtimeMs }))
    .sort((a, b) => b.mtime - a.mtime);
  const complete = others.find((o) => !o.name.includes('.'));
  for (const o of others) {
    if (o === complete || Date.now() - o.mtime < PRUNE_AFTER_MS) continue;
    rmSync(join(cache, o.name), { recursive: true, force: true });
  }
}

/**
 * Compiles src/ into the cache under `fingerprint`. Returns false when this checkout cannot (no esbuild, no
 * place to write, a source esbuild cannot read: tsx then says which).
 */
async function build(root, cache, fingerprint) {
  const target = join(cache, fingerprint);
  const fresh = `${target}.${process.pid}.tmp`;
  try {
    const { compileTree } = await import(pathToFileURL(join(__dirname, 'compile.mjs')).href);
    await compileTree(join(root, 'src'), fresh);
    renameSync(fresh, target);
  } catch {
    rmSync(fresh, { recursive: true, force: true });
    // Another start may have renamed the same build into place first: then it is this one.
    if (!existsSync(join(target, 'cli', 'start.cjs'))) return false;
  }
  try {
    prune(cache, fingerprint);
  } catch {
    // another start is pruning the same builds
  }
  return true;
}

/**
 * Runs the CLI of this checkout: its build (cli/start.cjs), made now if need be, else the sources
 * through tsx. A build that exists is required at once, with no promise on the way.
 */
function startCheckout(root) {
  const cache = join(root, 'node_modules', '.cache', 'learner-transfer');
  const fingerprint = sourceFingerprint(root);
  const entry = join(cache, fingerprint, 'cli', 'start.cjs');
  if (existsSync(entry)) return void require(entry);
  void build(root, cache, fingerprint).then(async (built) => {
    if (built) return void require(entry);
    // tsx's ES module API (its CommonJS one resolves its hooks wrongly from here).
    const tsx = await import('tsx/esm/api').catch(() => {
      throw new Error(
        'learner-transfer: this checkout can neither build its sources (esbuild) nor run them (tsx): ' +
          'run npm ci, which installs both',
      );
    });
    tsx.register();
    await import(pathToFileURL(join(root, 'src', 'cli', 'main.ts')).href);
  });
}

module.exports = { sourceFingerprint, startCheckout };
