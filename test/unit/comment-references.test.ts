// What a comment names exists: every file or path a comment of src/, test/, bench/ or scripts/ names
// (`core/burst.ts`, `acquire.lua`, `docs/learner-api.md`), and every "decision N" it cites is a numbered
// decision of docs/architecture.md. A file moved or renamed leaves no comment pointing at nothing.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { posix } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = new URL('../../', import.meta.url).pathname;

/**
 * Names of other projects' files, cited for their manner (fastify's lib/errors.js), and paths that only
 * exist once made (the test CLI's build), or are URLs of our own dashboard.
 */
const NOT_OURS = new Set([
  'lib/errors.js',
  'lib/core/errors.js',
  'test/internals/errors.test.js',
  // Made by the build from a package (scripts/compile.mjs), not from a file of ours.
  'vendor/commander.cjs',
  'bench/x.ts',
]);

/** A path-like word ending in a file extension of ours. */
const PATH =
  /(?<![\w@:/.-])((?:\.{1,2}\/)?(?:[\w.-]+\/)*[\w-]+(?:\.[\w-]+)*\.(?:ts|lua|md|mjs|cjs|js|json|ya?ml|css|sh))(?![\w/-])/g;
/** The comment part of a line: after //, a block comment's * or /*; in Lua, after --. */
const COMMENT = /(?:\/\/|\/\*|^\s*\*)(.*)$/;
const LUA_COMMENT = /--(.*)$/;

function tracked(): string[] {
  return execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], {
    cwd: ROOT,
    encoding: 'utf8',
  })
    .split('\n')
    .filter(Boolean);
}

/** Every comment reference of the tree that names nothing in it, as "file:line  reference". */
export function danglingReferences(files: string[], read: (f: string) => string): string[] {
  const known = new Set(files);
  const bases = new Set(files.map((f) => posix.basename(f)));
  const exists = (from: string, ref: string) =>
    known.has(posix.normalize(posix.join(posix.dirname(from), ref))) ||
    known.has(ref) ||
    known.has(`src/${ref}`) ||
    (!ref.includes('/') && bases.has(ref)) ||
    (ref.includes('/') && files.some((f) => f.endsWith(`/${ref.replace(/^\.\//, '')}`)));
  // A compiled file (cli/main.js, cli/main.cjs) names its source (cli/main.ts).
  const existsOrCompiled = (from: string, ref: string) =>
    exists(from, ref) || (/\.c?js$/.test(ref) && exists(from, ref.replace(/\.c?js$/, '.ts')));
  const out: string[] = [];
  for (const file of files) {
    if (!/^(src|test|bench|scripts)\/.*\.(ts|lua|mjs)$/.test(file)) continue;
    read(file)
      .split('\n')
      .forEach((line, i) => {
        const comment = (file.endsWith('.lua') ? LUA_COMMENT : COMMENT).exec(line)?.[1];
        if (!comment) return;
        for (const [, ref] of comment.matchAll(PATH)) {
          // A URL path, a flag (--outputFile.json), or a placeholder written in capitals (REPORT.json).
          if (/^[/-]/.test(ref!) || /^[A-Z_]+\.[a-z]+$/.test(ref!)) continue;
          if (NOT_OURS.has(ref!) || existsOrCompiled(file, ref!)) continue;
          out.push(`${file}:${i + 1}  ${ref}`);
        }
      });
  }
  return out;
}

/** Every "decision N" a comment or a doc cites that docs/architecture.md's numbered list lacks. */
export function unknownDecisions(files: string[], read: (f: string) => string, decisions: Set<number>) {
  const out: string[] = [];
  for (const file of files) {
    if (!/\.(ts|lua|mjs|md)$/.test(file)) continue;
    for (const m of read(file).matchAll(/\bdecisions? (\d+)/g)) {
      if (!decisions.has(Number(m[1]))) out.push(`${file}: decision ${m[1]}`);
    }
  }
  return out;
}

function numberedDecisions(doc: string): Set<number> {
  const section = doc.slice(doc.indexOf('## Decisions'));
  return new Set([...section.matchAll(/^(\d+)\. \*\*/gm)].map((m) => Number(m[1])));
}

const read = (f: string) => readFileSync(`${ROOT}${f}`, 'utf8');

describe('comment references', () => {
  const files = tracked();

  it('names only files that exist', () => {
    expect(files.length).toBeGreaterThan(300);
    expect(danglingReferences(files, read)).toEqual([]);
  });

  it('cites only decisions docs/architecture.md numbers', () => {
    const decisions = numberedDecisions(read('docs/architecture.md'));
    // Numbered 1..N with no gap: a decision is appended, never renumbered.
    expect(decisions.size).toBeGreaterThanOrEqual(14);
    expect([...decisions].sort((a, b) => a - b)).toEqual(
      Array.from({ length: decisions.size }, (_, i) => i + 1),
    );
    expect(unknownDecisions(files, read, decisions)).toEqual([]);
  });

  it('finds a reference that points at nothing, and a decision that is not numbered', () => {
    // Built from parts, so that this file's own comments and text name nothing that is not there.
    const [slashes, decision] = ['/'.repeat(2), ['decision', ''].join(' ')];
    const tree: Record<string, string> = {
      'src/core/a.ts': `${slashes} see core/b.ts and src/limiter/${'burst'}.ts, ${decision}3 and ${decision}99\n`,
      'src/core/b.ts': 'export const b = 1; // the real one: acquire.lua\n',
      'src/limiter/acquire.lua': '-- acquire\n',
    };
    const names = Object.keys(tree);
    expect(danglingReferences(names, (f) => tree[f]!)).toEqual([
      `src/core/a.ts:1  src/limiter/${'burst'}.ts`,
    ]);
    expect(unknownDecisions(names, (f) => tree[f]!, new Set([3]))).toEqual([`src/core/a.ts: ${decision}99`]);
  });
});
