// cancel --csv: the learners of a file read as `enqueue --csv` reads it, so the file enqueued by
// mistake is the file that withdraws them.
import { readCsv } from '../../queue/sources/csv.ts';
import type { LearnerRef } from './cancel.ts';

export interface CancelCsv {
  learners: LearnerRef[];
  /** Rows that name no learner, by line (as enqueue names them). */
  rejects: { line: number; reason: string }[];
  /** Data rows read (header excluded). */
  read: number;
}

export async function readCancelCsv(options: {
  file: string;
  defaultOrg?: string | undefined;
  knownOrgs: readonly string[];
}): Promise<CancelCsv> {
  const out: CancelCsv = { learners: [], rejects: [], read: 0 };
  for await (const ev of readCsv(options)) {
    out.read++;
    if (ev.kind === 'reject') out.rejects.push({ line: ev.line, reason: ev.reason });
    else out.learners.push({ org: ev.org, learnerId: ev.learnerId });
  }
  return out;
}
