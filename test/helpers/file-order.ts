// The order test/helpers/sequencer.ts gives the files of a run, apart from vitest: phases in order; in a
// phase the isolated files first, the longest first by the table (a file it does not know before them,
// the larger first); the files of a non-isolated project last, together, project by project.
//
// The files of a project that runs one file at a time (`chained`: the serial files take turns at the
// shared topologies) are one job as long as all of them together: its longest file is placed by that
// sum, so that the chain starts with the phase instead of becoming its tail.

export interface FileToOrder {
  /** Relative to the root, with `/`. */
  file: string;
  project: string;
  /** sequence.groupOrder: the phase. */
  phase: number;
  /** false for a project whose files share processes (isolate: false). */
  isolated: boolean;
  size: number;
  /** true for a file of a project whose files run one after another (the serial files). */
  chained?: boolean;
}

/**
 * The table with each chain's longest file given the chain's whole length: `files` are the files of the
 * run, the chained ones grouped by project.
 */
export function chainDurations(
  durations: Readonly<Record<string, number>>,
  files: readonly FileToOrder[],
): Record<string, number> {
  const out: Record<string, number> = { ...durations };
  const chains = new Map<string, FileToOrder[]>();
  for (const f of files) if (f.chained) chains.set(f.project, [...(chains.get(f.project) ?? []), f]);
  for (const chain of chains.values()) {
    const known = chain.filter((f) => durations[f.file] !== undefined);
    if (known.length === 0) continue;
    const head = known.reduce((a, b) => ((durations[b.file] ?? 0) > (durations[a.file] ?? 0) ? b : a));
    out[head.file] = known.reduce((sum, f) => sum + (durations[f.file] ?? 0), 0);
  }
  return out;
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
