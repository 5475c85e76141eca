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
    options: { force?: boolean | number } = {},
  ): Promise<ProduceCounts> {
    const counts = emptyCounts();
    if (items.length === 0) return counts;
    const force = options.force ?? false;
    let candidates = items;
    if (force !== false) {
      // A learner whose job is running right now finishes on its own; re-opening it would race the
      // worker (which may have written its final record and not yet moved the job to failed).
      const running = await this.#activeJobs(items);
      candidates = items.filter((it) => !running.has(`${it.org}\u0000${it.learnerId}`));
      counts.alreadyQueued += items.length - candidates.length;
    }
    const marks = await this.#store.markQueued(
      candidates.map((it) => ({ org: it.org, learnerId: it.learnerId, runId, source: it.source, force })),
    );
    const byOrg = new Map<string, { item: ProducerItem; mark: MarkResult }[]>();
    candidates.forEach((item, i) => {
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
      // A learner to (re)add may still have a failed job under its id (kept for bull-board): the add
      // below would then be a no-op and the learner would wait forever. This also repairs a learner
      // left queued by a crash between a re-open and its add: running the same command again fixes it.
      const check = list.filter((e) => e.mark.kind !== 'new');
      if (check.length > 0) {
        const pipe = this.#queues.redis.pipeline();
        for (const e of check) pipe.zscore(queue.keys.failed ?? '', jobIdOf(e.item.learnerId));
        const replies = (await pipe.exec()) ?? [];
        for (const [i, e] of check.entries()) {
          if (replies[i]?.[1] === null || replies[i]?.[1] === undefined) continue;
          await queue.remove(jobIdOf(e.item.learnerId));
        }
      }
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

  /** "org\0learnerId" of the items whose job is in a worker's hands now (BullMQ's active list). */
  async #activeJobs(items: readonly ProducerItem[]): Promise<Set<string>> {
    const out = new Set<string>();
    for (const org of new Set(items.map((it) => it.org))) {
      const queue = this.#queues.get(org);
      const active = new Set(await this.#queues.redis.lrange(queue.keys.active ?? '', 0, -1));
      for (const it of items)
        if (it.org === org && active.has(jobIdOf(it.learnerId))) out.add(`${org}\u0000${it.learnerId}`);
    }
    return out;
  }
}
