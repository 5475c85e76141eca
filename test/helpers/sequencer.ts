// The order in which vitest hands the files of a phase to its workers: the longest first, by the seconds
// each file took in a recent run (test/durations.json), so that a long file never starts last and runs on
// alone at the end of its phase while the other workers sit idle (longest-processing-time-first).
//
// Vitest's own order is by project name, then by the durations of its cache (node_modules/.vite), which a
// clean clone does not have, and then by file size: in CI the fault seeds (a small file of 72 s) started
// last in the load-sensitive phase and ran on alone after every other file there had ended.
//
// Kept from vitest: the phases (sequence.groupOrder) run in order, and the files of a non-isolated project
// (unit, integration, e2e) come last in their phase, project by project, so that a worker runs them one
// after the other in a process that has loaded their modules once (vitest reuses a process only for a
// file of the same project): the longest first within a project, not across the phase. A file the table does not know yet runs first (its time is unknown;
// by size, as vitest does). `npm run test:durations` rewrites the table from a run's JSON report. The
// order itself is test/helpers/file-order.ts.
import { readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { chainDurations, compareFiles, type FileToOrder } from './file-order.ts';

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
    const described = files.map((spec): [FileToOrder, TestSpecification] => [
      {
        file: relative(root, spec.moduleId).split('\\').join('/'),
        project: spec.project.name,
        phase: spec.project.config.sequence.groupOrder,
        isolated: spec.project.config.isolate !== false,
        size: statSync(spec.moduleId).size,
        chained: spec.project.name === 'serial',
      },
      spec,
    ]);
    const order = compareFiles(
      chainDurations(
        readDurations(root),
        described.map(([file]) => file),
      ),
    );
    return described.sort(([a], [b]) => order(a, b)).map(([, spec]) => spec);
  }
}
