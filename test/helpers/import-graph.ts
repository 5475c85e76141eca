// The import graph of src/ and the two rules the house keeps: imports run only down the layers, and no
// file reaches itself through its imports. Read with TypeScript's own pre-processor, so type-only
// imports, re-exports and dynamic imports of a literal path all count as edges.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

/** file (relative to src/, forward slashes) -> the files of src/ it imports. */
export type ImportGraph = Map<string, string[]>;

function listTs(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...listTs(path));
    else if (entry.name.endsWith('.ts')) out.push(path);
  }
  return out;
}

export function readImportGraph(srcDir: string): ImportGraph {
  const graph: ImportGraph = new Map();
  for (const file of listTs(srcDir).sort()) {
    const info = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
    const deps: string[] = [];
    for (const ref of info.importedFiles) {
      if (!ref.fileName.startsWith('.')) continue; // a package, not a file of ours
      deps.push(
        relative(srcDir, resolve(dirname(file), ref.fileName))
          .split('\\')
          .join('/'),
      );
    }
    graph.set(relative(srcDir, file).split('\\').join('/'), [...new Set(deps)].sort());
  }
  return graph;
}

/** The layer of a file: its first folder under src/ ('' for a loose file at the top). */
export function layerOf(file: string): string {
  const slash = file.indexOf('/');
  return slash < 0 ? '' : file.slice(0, slash);
}

export interface LayerViolation {
  from: string;
  to: string;
  why: string;
}

/**
 * Every import that the rules do not allow. `rules` maps a layer to the layers it may import (its own
 * is always allowed); a file in no listed layer, or importing one, is a violation too.
 */
export function layerViolations(
  graph: ImportGraph,
  rules: Readonly<Record<string, readonly string[]>>,
): LayerViolation[] {
  const out: LayerViolation[] = [];
  for (const [from, deps] of graph) {
    const own = layerOf(from);
    const allowed = rules[own];
    if (!allowed) {
      out.push({
        from,
        to: '',
        why: own ? `layer '${own}/' is not in the table` : 'a loose file at the top of src/',
      });
      continue;
    }
    for (const to of deps) {
      const target = layerOf(to);
      if (target === own) continue;
      if (!allowed.includes(target)) {
        out.push({ from, to, why: `'${own}/' may not import '${target || 'a loose file'}/'` });
      }
    }
  }
  return out;
}

/**
 * The graph inside one layer that has wings (sub-folders, as `ops/`): its files and their imports of one
 * another, with the layer's folder taken off, so that `layerViolations` holds the wings to their table.
 */
export function wingGraph(graph: ImportGraph, layer: string): ImportGraph {
  const inside = (f: string) => f.startsWith(`${layer}/`);
  const strip = (f: string) => f.slice(layer.length + 1);
  return new Map(
    [...graph]
      .filter(([f]) => inside(f))
      .map(([f, deps]) => [strip(f), deps.filter(inside).map(strip)] as [string, string[]]),
  );
}

/** The cycles of the graph: each strongly connected component of two or more files, or a self-import. */
export function importCycles(graph: ImportGraph): string[][] {
  // Tarjan's algorithm, iterative so that a deep chain cannot overflow the stack.
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const cycles: string[][] = [];
  for (const root of graph.keys()) {
    if (index.has(root)) continue;
    const work: Array<{ node: string; i: number }> = [{ node: root, i: 0 }];
    index.set(root, next);
    low.set(root, next++);
    stack.push(root);
    onStack.add(root);
    while (work.length > 0) {
      const top = work[work.length - 1]!;
      const deps = graph.get(top.node) ?? [];
      if (top.i < deps.length) {
        const dep = deps[top.i++]!;
        if (!graph.has(dep)) continue;
        if (!index.has(dep)) {
          index.set(dep, next);
          low.set(dep, next++);
          stack.push(dep);
          onStack.add(dep);
          work.push({ node: dep, i: 0 });
        } else if (onStack.has(dep)) {
          low.set(top.node, Math.min(low.get(top.node)!, index.get(dep)!));
        }
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent) low.set(parent.node, Math.min(low.get(parent.node)!, low.get(top.node)!));
      if (low.get(top.node) === index.get(top.node)) {
        const component: string[] = [];
        let member: string;
        do {
          member = stack.pop()!;
          onStack.delete(member);
          component.push(member);
        } while (member !== top.node);
        if (component.length > 1 || deps.includes(top.node)) cycles.push(component.sort());
      }
    }
  }
  return cycles;
}
