// Shared by the benchmarks: figures are printed as one table, ratios against a baseline measured in the
// same run (absolute times on a shared 2-core machine say little).
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export type Figures = Record<string, number | string>;

/** True when this module is the entry point (`node bin/run-ts.js bench/x.ts`). */
export function isMain(moduleUrl: string): boolean {
  return resolve(process.argv[1] ?? '') === fileURLToPath(moduleUrl);
}

export function round(n: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

export function printFigures(title: string, figures: Figures): void {
  const width = Math.max(...Object.keys(figures).map((k) => k.length));
  console.log(title);
  for (const [k, v] of Object.entries(figures)) console.log(`  ${k.padEnd(width)}  ${v}`);
}

export function mb(bytes: number): number {
  return round(bytes / 1024 / 1024, 1);
}

/** The median of some figures (the mean of the middle two for an even count). */
export function median(values: readonly number[]): number {
  const v = [...values].sort((a, b) => a - b);
  const mid = Math.floor(v.length / 2);
  return v.length % 2 ? (v[mid] ?? NaN) : ((v[mid - 1] ?? NaN) + (v[mid] ?? NaN)) / 2;
}
