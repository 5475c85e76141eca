// The order test/helpers/sequencer.ts gives the files of a run, apart from vitest: phases in order; in a
// phase the isolated files first, the longest first by the table (a file it does not know before them,
// the larger first); the files of a non-isolated project last, together, project by project.

export interface FileToOrder {
  /** Relative to the root, with `/`. */
  file: string;
  project: string;
  /** sequence.groupOrder: the phase. */
  phase: number;
  /** false for a project whose files share processes (isolate: false). */
  isolated: boolean;
  size: number;
}

export function compareFiles(durations: Readonly<Record<string, number>>) {
  return (a: FileToOrder, b: FileToOrder): number => {
    if (a.phase !== b.phase) return a.phase - b.phase;
    if (a.isolated !== b.isolated) return a.isolated ? -1 : 1;
    if (!a.isolated && a.project !== b.project) return a.project < b.project ? -1 : 1;
    const da = durations[a.file];
    const db = durations[b.file];
    if (da === undefined || db === undefined) {
      if (da !== undefined) return 1;
      if (db !== undefined) return -1;
      return b.size - a.size;
    }
    return db - da;
  };
}
