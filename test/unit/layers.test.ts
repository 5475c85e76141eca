// The house's two rules, checked on every run: imports run only down the layers drawn in
// docs/architecture.md, and no file of src/ reaches itself through its imports.
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  importCycles,
  layerViolations,
  readImportGraph,
  wingGraph,
  type ImportGraph,
} from '../helpers/import-graph.ts';

const SRC = new URL('../../src/', import.meta.url).pathname;
const DOC = new URL('../../docs/architecture.md', import.meta.url).pathname;

/** Each layer (a folder of src/) and the layers below it that it may import; its own always. */
const LAYERS: Readonly<Record<string, readonly string[]>> = {
  cli: [
    'demo',
    'dashboard',
    'worker',
    'ops',
    'app',
    'queue',
    'api',
    'outcomes',
    'limiter',
    'claims',
    'redis',
    'core',
    'simulator',
  ],
  demo: [
    'dashboard',
    'worker',
    'ops',
    'app',
    'queue',
    'api',
    'outcomes',
    'limiter',
    'claims',
    'redis',
    'core',
    'simulator',
  ],
  dashboard: ['ops', 'app', 'queue', 'api', 'outcomes', 'limiter', 'claims', 'redis', 'core'],
  worker: ['ops', 'app', 'queue', 'api', 'outcomes', 'limiter', 'claims', 'redis', 'core'],
  ops: ['app', 'queue', 'api', 'outcomes', 'limiter', 'claims', 'redis', 'core'],
  app: ['queue', 'api', 'outcomes', 'limiter', 'claims', 'redis', 'core'],
  queue: ['api', 'outcomes', 'limiter', 'claims', 'redis', 'core'],
  api: ['outcomes', 'core'],
  outcomes: ['redis', 'core'],
  limiter: ['redis', 'core'],
  claims: ['redis', 'core'],
  redis: ['core'],
  core: [],
  simulator: ['core'],
};

/**
 * The wings of `ops/`, top to bottom: each a folder of one concern, importing only the wings below it
 * that its row lists.
 */
const OPS_WINGS: Readonly<Record<string, readonly string[]>> = {
  metrics: ['notify', 'views', 'intake', 'actions', 'eta', 'audit'],
  notify: ['views', 'intake', 'actions', 'eta', 'audit'],
  views: ['intake', 'actions', 'eta', 'audit'],
  intake: ['actions', 'eta', 'audit'],
  actions: ['eta', 'audit'],
  eta: ['audit'],
  audit: [],
};

const graph = readImportGraph(SRC);

/** The rows of a table of docs/architecture.md that starts after `heading`: name, and what it may import. */
function docTable(heading: string, prefix: string): Record<string, string[]> {
  const text = readFileSync(DOC, 'utf8');
  const start = text.indexOf(heading);
  expect(start, `docs/architecture.md has a section "${heading}"`).toBeGreaterThanOrEqual(0);
  const rows = new Map<string, string[]>();
  const cell = new RegExp(`\`${prefix}([a-z-]+)/\``, 'g');
  for (const line of text.slice(start).split('\n').slice(1)) {
    if (line.startsWith('#')) break;
    const m = new RegExp(`^\\|\\s*\`${prefix}([a-z-]+)/\`\\s*\\|.*\\|\\s*([^|]*)\\|\\s*$`).exec(line);
    if (m)
      rows.set(
        m[1]!,
        [...m[2]!.matchAll(cell)].map((x) => x[1]!),
      );
  }
  return Object.fromEntries(rows);
}

describe('the layers of src/', () => {
  it('reads the whole tree: every folder of src/ is a layer of the table, and no file is loose at the top', () => {
    const entries = readdirSync(SRC, { withFileTypes: true });
    expect(entries.filter((e) => !e.isDirectory()).map((e) => e.name)).toEqual([]);
    expect(entries.map((e) => e.name).sort()).toEqual(Object.keys(LAYERS).sort());
    // Enough files and edges that an unreadable tree cannot pass as a clean one.
    expect(graph.size).toBeGreaterThan(100);
    expect([...graph.values()].flat().length).toBeGreaterThan(300);
  });

  it('has no import against the layers', () => {
    expect(layerViolations(graph, LAYERS)).toEqual([]);
  });

  it('has no import cycle', () => {
    expect(importCycles(graph)).toEqual([]);
  });

  it('nothing imports cli/, and core/ imports no other layer', () => {
    const intoCli = [...graph].filter(
      ([f, deps]) => !f.startsWith('cli/') && deps.some((d) => d.startsWith('cli/')),
    );
    expect(intoCli).toEqual([]);
    const coreOut = [...graph].filter(
      ([f, deps]) => f.startsWith('core/') && deps.some((d) => !d.startsWith('core/')),
    );
    expect(coreOut).toEqual([]);
  });

  it('docs/architecture.md draws the same table', () => {
    // One row per layer: | `name/` | ... | `a/`, `b/` | (the last cell lists what it may import, or "nothing").
    expect(docTable('# Architecture', '')).toEqual(LAYERS);
  });
});

describe('the wings of ops/', () => {
  const wings = wingGraph(graph, 'ops');

  it('holds every file of ops/ in a wing of the table, none loose in ops/ itself', () => {
    const folders = readdirSync(`${SRC}ops`, { withFileTypes: true });
    expect(folders.filter((e) => !e.isDirectory()).map((e) => e.name)).toEqual([]);
    expect(folders.map((e) => e.name).sort()).toEqual(Object.keys(OPS_WINGS).sort());
    expect(wings.size).toBeGreaterThan(40);
  });

  it('has no import of one wing against the table', () => {
    expect(layerViolations(wings, OPS_WINGS)).toEqual([]);
  });

  it('docs/architecture.md draws the same wings', () => {
    expect(docTable('## The wings of `ops/`', 'ops/')).toEqual(OPS_WINGS);
  });
});

describe('the guard itself', () => {
  const sample: ImportGraph = new Map([
    ['core/a.ts', ['redis/b.ts']],
    ['redis/b.ts', ['core/a.ts']],
    ['cli/c.ts', ['cli/c.ts']],
    ['loose.ts', []],
  ]);

  it('finds an import that runs up, a file in no layer, and a cycle', () => {
    expect(layerViolations(sample, { core: [], redis: ['core'], cli: ['core'] })).toEqual([
      { from: 'core/a.ts', to: 'redis/b.ts', why: "'core/' may not import 'redis/'" },
      { from: 'loose.ts', to: '', why: 'a loose file at the top of src/' },
    ]);
    expect(importCycles(sample)).toEqual([['core/a.ts', 'redis/b.ts'], ['cli/c.ts']]);
  });
});
