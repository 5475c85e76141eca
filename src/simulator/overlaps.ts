// Transfer calls in flight at the same time for one learner, which "one call in flight per
// learner" forbids. From the record: a PATCH is in flight from arrival until answered (or reset).
import type { RequestRecord } from './types.ts';

export interface Overlap {
  learnerId: number;
  /** seq numbers of the two requests */
  first: number;
  second: number;
}

export function findOverlaps(record: readonly RequestRecord[]): Overlap[] {
  const byLearner = new Map<number, RequestRecord[]>();
  for (const r of record) {
    if (r.method !== 'PATCH' || r.learnerId === undefined) continue;
    const list = byLearner.get(r.learnerId);
    if (list) list.push(r);
    else byLearner.set(r.learnerId, [r]);
  }
  const out: Overlap[] = [];
  for (const [learnerId, list] of byLearner) {
    if (list.length < 2) continue;
    list.sort((a, b) => a.receivedAt - b.receivedAt);
    let open = list[0] as RequestRecord;
    for (let i = 1; i < list.length; i++) {
      const next = list[i] as RequestRecord;
      const openEnd = open.respondedAt ?? Number.POSITIVE_INFINITY;
      if (next.receivedAt < openEnd) out.push({ learnerId, first: open.seq, second: next.seq });
      if ((next.respondedAt ?? Number.POSITIVE_INFINITY) > openEnd) open = next;
    }
  }
  return out;
}
