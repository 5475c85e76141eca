// The order test/helpers/sequencer.ts gives the files of a run, apart from vitest: phases in order; in a
// phase the isolated files first, the longest first by the table (a file it does not know before them,
// the larger first); the files of a non-isolated project last, together, project by project.
//
// The files of a project that runs one file at a time (`chained`: the serial files take turns at the
// shared topologies) are one job as long as all of them together: they run the longest first, and each is
// placed by what is left of the chain from it on (the first by the whole sum), so that the chain starts
// with the phase and its next file is queued before the end of the one running, instead of behind the
// phase's long files (a run showed Sentinel starting 45 s after the cluster file had ended).

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
 * The table with each chained file given the length of its chain from it on, the longest first (its own
 * time and that of every shorter file of its chain): `files` are the files of the run, the chained ones
 * grouped by project.
 */
export function chainDurations(
  durations: Readonly<Record<string, number>>,
  files: readonly FileToOrder[],
): Record<string, number> {
  const out: Record<string, number> = { ...durations };
  const chains = new Map<string, FileToOrder[]>();
  for (const f of files) if (f.chained) chains.set(f.project, [...(chains.get(f.project) ?? []), f]);
  for (const chain of chains.values()) {
    const known = chain
      .filter((f) => durations[f.file] !== undefined)
      .sort((a, b) => (durations[b.file] ?? 0) - (durations[a.file] ?? 0));
    let left = known.reduce((sum, f) => sum + (durations[f.file] ?? 0), 0);
    for (const f of known) {
      out[f.file] = left;
      left -= durations[f.file] ?? 0;
    }
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
