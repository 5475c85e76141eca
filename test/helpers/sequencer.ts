// The order in which vitest hands the files of a phase to its workers: the longest first, by the seconds
// each file took in a recent run (test/durations.json), so that a long file never starts last and runs on
// alone at the end of its phase while the other workers sit idle (longest-processing-time-first).
//
// Vitest's own order is by project name, then by the durations of its cache (node_modules/.vite), which a
// clean clone does not have, and then by file size: in CI the fault seeds (a small file of 72 s) started
// last in the load-sensitive phase and ran 70 s alone after every other file there had ended.
//
// Kept from vitest: the phases (sequence.groupOrder) run in order, and the files of a non-isolated project
// (unit) come last in their phase, together, so that one worker runs them one after the other in a process
// that has loaded their modules once. A file the table does not know yet runs first (its time is unknown;
// by size, as vitest does). `npm run test:durations` rewrites the table from a run's JSON report.
import { readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

export const DURATIONS_FILE = 'test/durations.json';

function readDurations(root: string): Record<string, number> {
  try {
    return JSON.parse(readFileSync(join(root, DURATIONS_FILE), 'utf8')) as Record<string, number>;
  } catch {
    return {};
  }
}

export class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const root = this.ctx.config.root;
    const durations = readDurations(root);
    const key = (spec: TestSpecification) => relative(root, spec.moduleId).split('\\').join('/');
    const size = (spec: TestSpecification) => statSync(spec.moduleId).size;
    return [...files].sort((a, b) => {
      const phase = a.project.config.sequence.groupOrder - b.project.config.sequence.groupOrder;
      if (phase !== 0) return phase;
      const shared = Number(a.project.config.isolate === false) - Number(b.project.config.isolate === false);
      if (shared !== 0) return shared;
      if (a.project.config.isolate === false && a.project.name !== b.project.name)
        return a.project.name < b.project.name ? -1 : 1;
      const da = durations[key(a)];
      const db = durations[key(b)];
      if (da === undefined || db === undefined) {
        if (da !== undefined) return 1;
        if (db !== undefined) return -1;
        return size(b) - size(a);
      }
      return db - da;
    });
  }
}
