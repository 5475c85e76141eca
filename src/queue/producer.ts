// The producer: every source (CSV, crawl, reconcile, retry) enqueues through here, so dedupe, run
// records and outcome seeding are the same for all. A learner is marked `queued` in the outcome store
// before its job is added: a crash between the two leaves a `queued` record whose job a re-run adds
// again (job ids make that a no-op when the job exists), never a job without a record.
import { JOB_NAME, jobIdOf, type TransferJob } from './job.ts';
import type { QueueSet } from './queues.ts';
import type { MarkResult, OutcomeStore } from '../outcomes/store.ts';
import type { Bucket } from '../outcomes/record.ts';

export interface ProducerItem {
  org: string;
  learnerId: number;
  source: string;
}

export interface ProduceCounts {
  /** New jobs for learners the store had not seen, or re-opened on purpose (force). */
  enqueued: number;
  /** Learners already queued or retrying (their job exists; adding it again is a no-op). */
  alreadyQueued: number;
  /** Learners with a final outcome, kept as they are (by bucket). */
  alreadyDone: Partial<Record<Bucket, number>>;
}

export function emptyCounts(): ProduceCounts {
  return { enqueued: 0, alreadyQueued: 0, alreadyDone: {} };
}

export function addCounts(into: ProduceCounts, more: ProduceCounts): void {
  into.enqueued += more.enqueued;
  into.alreadyQueued += more.alreadyQueued;
  for (const [b, n] of Object.entries(more.alreadyDone)) {
    into.alreadyDone[b as Bucket] = (into.alreadyDone[b as Bucket] ?? 0) + n;
  }
}

export class Producer {
  readonly #queues: QueueSet;
  readonly #store: OutcomeStore;

  constructor(queues: QueueSet, store: OutcomeStore) {
    this.#queues = queues;
    this.#store = store;
  }

  /**
   * Enqueues one batch (the caller batches: ~1000 keeps round trips few and memory flat).
   * `force` re-opens learners whose outcome is final (reconcile, retry).
   */
  async add(
    items: readonly ProducerItem[],
    runId: string,
    options: { force?: boolean } = {},
  ): Promise<ProduceCounts> {
    const counts = emptyCounts();
    if (items.length === 0) return counts;
    const force = options.force ?? false;
    const marks = await this.#store.markQueued(
      items.map((it) => ({ org: it.org, learnerId: it.learnerId, runId, source: it.source, force })),
    );
    const byOrg = new Map<string, { item: ProducerItem; mark: MarkResult }[]>();
    items.forEach((item, i) => {
      const mark = marks[i] as MarkResult;
      if (mark.kind === 'kept' && mark.bucket !== 'queued' && mark.bucket !== 'retrying') {
        counts.alreadyDone[mark.bucket] = (counts.alreadyDone[mark.bucket] ?? 0) + 1;
        return;
      }
      if (mark.kind === 'kept') counts.alreadyQueued++;
      else counts.enqueued++;
      const list = byOrg.get(item.org) ?? [];
      list.push({ item, mark });
      byOrg.set(item.org, list);
    });
    for (const [org, list] of byOrg) {
      const queue = this.#queues.get(org);
      // A re-opened learner may still have its failed job (kept for bull-board): remove it, or the add
      // below would be a no-op and the learner would wait forever.
      const reopened = list.filter((e) => e.mark.kind === 'reopened');
      for (const e of reopened) await queue.remove(jobIdOf(e.item.learnerId));
      await queue.addBulk(
        list.map(({ item }) => ({
          name: JOB_NAME,
          data: { org, learnerId: item.learnerId, runId, source: item.source } satisfies TransferJob,
          opts: { jobId: jobIdOf(item.learnerId) },
        })),
      );
    }
    return counts;
  }
}
