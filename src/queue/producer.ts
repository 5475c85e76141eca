// The producer: every source enqueues through here (dedupe, runs, outcome seeding alike). A learner is
// marked `queued` before its job is added: a crash between leaves a record a re-run adds a job for,
// never a job without a record.
import { JOB_NAME, jobIdOf, type TransferJob } from './job.ts';
import type { QueueSet, TransferQueue } from './queues.ts';
import {
  emptyUrgentBatch,
  moveAhead,
  type AheadResult,
  type Priority,
  type UrgentBatch,
} from './priority.ts';
import type { MarkResult, OutcomeStore } from '../outcomes/store.ts';
import { isFinalBucket, type Bucket } from '../outcomes/record.ts';
import type { Claims } from '../claims/claims.ts';
import type { Keys } from '../core/keys.ts';
import { faultPoint } from '../core/fault.ts';
import { LanesDue } from './lanes-due.ts';
import { AWAITING_APPROVAL } from '../outcomes/record.ts';

export interface ProducerItem {
  org: string;
  learnerId: number;
  source: string;
  /** Line of the input file, for rejects. */
  line?: number;
  /** The organization id the learner list showed for it (for `report --reverse`). */
  previousOrgId?: number | undefined;
}

export interface ProduceCounts {
  /** New jobs for learners the store had not seen, or re-opened on purpose (force). */
  enqueued: number;
  /** Learners already queued or retrying (their job exists; adding it again is a no-op). */
  alreadyQueued: number;
  /** Learners with a final outcome, kept as they are (by bucket). */
  alreadyDone: Partial<Record<Bucket, number>>;
  /** Learners claimed by another organization, left where they are (by holding organization). */
  claimedElsewhere: Record<string, number>;
  /** Learners moved here from another organization on purpose (--move, a reconcile). */
  moved: number;
  /** Learners past a canary (`canary`), recorded awaiting approval with no job (or already so). */
  awaitingApproval: number;
}

/** A learner the producer did not take: claimed by another organization, or busy there (with --move). */
export interface ClaimedElsewhereItem {
  item: ProducerItem;
  holder: string;
  reason: string;
}

export function emptyCounts(): ProduceCounts {
  return {
    enqueued: 0,
    alreadyQueued: 0,
    alreadyDone: {},
    claimedElsewhere: {},
    moved: 0,
    awaitingApproval: 0,
  };
}

export function claimedElsewhereTotal(c: ProduceCounts): number {
  return Object.values(c.claimedElsewhere).reduce((a, b) => a + b, 0);
}

/** "acme 3, beta 1": learners held by other organizations, for summaries. */
export function formatClaimedElsewhere(c: ProduceCounts): string {
  return Object.entries(c.claimedElsewhere)
    .map(([o, n]) => `${o} ${n}`)
    .join(', ');
}

export function addCounts(into: ProduceCounts, more: ProduceCounts): void {
  into.enqueued += more.enqueued;
  into.alreadyQueued += more.alreadyQueued;
  into.moved += more.moved;
  into.awaitingApproval += more.awaitingApproval;
  for (const [o, n] of Object.entries(more.claimedElsewhere))
    into.claimedElsewhere[o] = (into.claimedElsewhere[o] ?? 0) + n;
  for (const [b, n] of Object.entries(more.alreadyDone)) {
    into.alreadyDone[b as Bucket] = (into.alreadyDone[b as Bucket] ?? 0) + n;
  }
}

export interface AddOptions {
  /** Re-open final learners (reconcile, retry): true, or only records older than a time. */
  force?: boolean | number;
  /** Re-open learners an operator cancelled (a person names them again); a crawl's next pass does not. */
  reopenCancelled?: boolean;
  /** Move learners claimed by another organization here (`--move`, a reconcile), when final there. */
  move?: boolean;
  /** Hears each learner left where it is (the CSV producer writes it to the rejects file). */
  onClaimedElsewhere?: (held: ClaimedElsewhereItem) => void | Promise<void>;
  /** `urgent`: put these learners ahead of their organization's bulk (priority.ts); nothing else changes. */
  priority?: Priority;
  /** Hears what an urgent add did, per organization and batch (for the change log). */
  onUrgent?: (batch: UrgentBatch) => void | Promise<void>;
  /**
   * A canary run (docs/canary.md): only the first `canary` learners per organization get a job, the
   * others wait `awaiting-approval`. Learners kept as they were do not count toward it.
   */
  canary?: number | undefined;
}

type Entry = { item: ProducerItem; mark: MarkResult };

/** A candidate's mark, and whether it was recorded awaiting approval. */
type Marked = { mark: MarkResult; awaiting: boolean };

function jobData(org: string, item: ProducerItem, runId: string, canary: boolean): TransferJob {
  return { org, learnerId: item.learnerId, runId, source: item.source, ...(canary ? { canary: 1 } : {}) };
}

export class Producer {
  readonly #queues: QueueSet;
  /** Where `work` processes learn that an organization has work (worker/lanes.ts). */
  readonly #lanes: LanesDue;
  readonly #store: OutcomeStore;
  readonly #claims: Claims;
  readonly #keys: Keys;
  readonly #defaults: AddOptions;

  constructor(queues: QueueSet, store: OutcomeStore, claims: Claims, keys: Keys, defaults: AddOptions = {}) {
    this.#queues = queues;
    this.#store = store;
    this.#claims = claims;
    this.#keys = keys;
    this.#defaults = defaults;
    this.#lanes = new LanesDue(queues.redis, keys);
  }

  /**
   * The same producer with default options under every add (an add's own options win): how a command
   * gives `--priority urgent` to every learner of a source that calls add itself (enqueue --csv).
   */
  withDefaults(defaults: AddOptions): Producer {
    return new Producer(this.#queues, this.#store, this.#claims, this.#keys, {
      ...this.#defaults,
      ...defaults,
    });
  }

  /**
   * Enqueues one batch (the caller batches: ~1000 keeps round trips few and memory flat). Each learner is
   * claimed for its organization first: one claimed by another organization is left there (counted in
   * claimedElsewhere, told to onClaimedElsewhere) unless `move`.
   */
  async add(
    items: readonly ProducerItem[],
    runId: string,
    addOptions: AddOptions = {},
  ): Promise<ProduceCounts> {
    const options = { ...this.#defaults, ...addOptions };
    const counts = emptyCounts();
    if (items.length === 0) return counts;
    const force = options.force ?? false;
    let candidates = await this.#claim(items, runId, options, counts);
    if (force !== false) {
      // A learner whose job is running right now finishes on its own; re-opening it would race the
      // worker (which may have written its final record and not yet moved the job to failed).
      const running = await this.#activeJobs(candidates);
      const before = candidates.length;
      candidates = candidates.filter((it) => !running.has(`${it.org}\u0000${it.learnerId}`));
      counts.alreadyQueued += before - candidates.length;
    }
    const marked = await this.#mark(candidates, runId, options);
    faultPoint('after-mark');
    const byOrg = new Map<string, Entry[]>();
    candidates.forEach((item, i) => {
      const { mark, awaiting } = marked[i] as Marked;
      if (awaiting || (mark.kind === 'kept' && mark.bucket === AWAITING_APPROVAL)) {
        counts.awaitingApproval++;
        return;
      }
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
      if (options.priority === 'urgent') {
        await this.#addUrgent(queue, org, runId, list, options);
        await this.#lanes.markDue([org]);
        continue;
      }
      await queue.addBulk(
        list.map(({ item }) => ({
          name: JOB_NAME,
          data: jobData(org, item, runId, options.canary !== undefined),
          opts: { jobId: jobIdOf(item.learnerId) },
        })),
      );
    }
    // After the jobs exist: a worker attached by this mark finds them.
    await this.#lanes.markDue(byOrg.keys());
    return counts;
  }

  /**
   * Puts an organization's urgent learners on the head of its wait list in input order: new jobs added
   * with `lifo`, existing ones moved (moveAhead), walking the list from its end in runs of one kind.
   */
  async #addUrgent(
    queue: TransferQueue,
    org: string,
    runId: string,
    list: readonly Entry[],
    options: AddOptions,
  ): Promise<void> {
    const result = new Map<number, AheadResult>();
    const runs: { exists: boolean; entries: Entry[] }[] = [];
    for (let i = list.length - 1; i >= 0; i--) {
      const e = list[i] as Entry;
      const exists = e.mark.kind === 'kept';
      const last = runs.at(-1);
      if (last && last.exists === exists) last.entries.push(e);
      else runs.push({ exists, entries: [e] });
    }
    for (const run of runs) {
      // The run is reversed (its last learner first): each add and move pushes on the head.
      await queue.addBulk(
        run.entries.map(({ item }) => ({
          name: JOB_NAME,
          data: jobData(org, item, runId, options.canary !== undefined),
          opts: { jobId: jobIdOf(item.learnerId), lifo: true },
        })),
      );
      const ids = run.entries.map((e) => e.item.learnerId);
      if (run.exists) for (const [id, r] of await moveAhead(queue, ids)) result.set(id, r);
      else for (const id of ids) result.set(id, 'added');
    }
    const batch = emptyUrgentBatch(org, runId);
    for (const { item } of list) {
      const r = result.get(item.learnerId) ?? 'gone';
      (r === 'in-flight' ? batch.inFlight : batch[r]).push(item.learnerId);
    }
    await options.onUrgent?.(batch);
  }

  /**
   * Marks the candidates in the store: all `queued`, or for a canary run the organization's first
   * learners up to the canary `queued` and the rest `awaiting-approval`. The canary counts only learners
   * this add really wrote (new or re-opened): a learner kept as it was leaves its place to the next one.
   */
  async #mark(candidates: readonly ProducerItem[], runId: string, options: AddOptions): Promise<Marked[]> {
    const mark = (it: ProducerItem, bucket: 'queued' | 'awaiting-approval') => ({
      org: it.org,
      learnerId: it.learnerId,
      runId,
      source: it.source,
      force: options.force ?? false,
      reopenCancelled: options.reopenCancelled === true,
      previousOrgId: it.previousOrgId,
      bucket,
    });
    const size = options.canary;
    if (size === undefined) {
      const marks = await this.#store.markQueued(candidates.map((it) => mark(it, 'queued')));
      return marks.map((m) => ({ mark: m, awaiting: false }));
    }
    // The canary is counted in the script that writes the marks, so that two adds to one run at once
    // (a crawl's batches overlap) never both take its last places.
    const marks = await this.#store.markQueued(
      candidates.map((it) => mark(it, 'queued')),
      undefined,
      size,
    );
    const out = marks.map((m) => ({ mark: m, awaiting: m.kind !== 'kept' && m.awaiting === true }));
    const past = new Set(candidates.filter((_, i) => out[i]?.awaiting).map((it) => it.org));
    // Where status and the ETA find the run a person must approve (ops/actions/canary.ts).
    for (const org of past) await this.#queues.redis.hset(this.#keys.canaryRuns(org), runId, String(size));
    return out;
  }

  /** Claims the items; returns the ones this organization holds now (claimed, or moved here). */
  async #claim(
    items: readonly ProducerItem[],
    runId: string,
    options: AddOptions,
    counts: ProduceCounts,
  ): Promise<ProducerItem[]> {
    const held = async (h: ClaimedElsewhereItem) => {
      counts.claimedElsewhere[h.holder] = (counts.claimedElsewhere[h.holder] ?? 0) + 1;
      await options.onClaimedElsewhere?.(h);
    };
    const results = await this.#claims.claim(items, 'claim');
    const kept: ProducerItem[] = [];
    const toMove: { item: ProducerItem; holder: string }[] = [];
    for (const [i, r] of results.entries()) {
      const item = items[i] as ProducerItem;
      if (r.kind === 'ok') kept.push(item);
      else if (r.kind === 'elsewhere' && options.move) toMove.push({ item, holder: r.holder });
      else if (r.kind === 'elsewhere') {
        await held({
          item,
          holder: r.holder,
          reason: `learner ${item.learnerId} is claimed by organization '${r.holder}' (an earlier line or run); moving it there takes --move`,
        });
      }
    }
    if (toMove.length === 0) return kept;
    // A move only takes a learner that is done (or failed) where it is, with no call in flight there.
    const movable: { item: ProducerItem; holder: string }[] = [];
    for (const m of toMove) {
      const [record, lease] = await Promise.all([
        this.#store.get(m.holder, m.item.learnerId),
        this.#queues.redis.hget(this.#keys.lease(m.holder), String(m.item.learnerId)),
      ]);
      if (lease || (record && !isFinalBucket(record.b as Bucket))) {
        await held({
          ...m,
          reason: `learner ${m.item.learnerId} is still ${lease ? 'in flight' : record?.b} in organization '${m.holder}': it moves once it is done there`,
        });
      } else movable.push(m);
    }
    const moved = await this.#claims.claim(
      movable.map((m) => m.item),
      'move',
    );
    for (const [i, r] of moved.entries()) {
      const m = movable[i] as { item: ProducerItem; holder: string };
      if (r.kind === 'elsewhere') {
        await held({ ...m, reason: `learner ${m.item.learnerId} is claimed by organization '${r.holder}'` });
        continue;
      }
      kept.push(m.item);
      if (r.kind === 'moved') {
        counts.moved++;
        await this.#store.appendClaimMove(m.item.org, m.item.learnerId, runId, r.from, m.item.source);
      }
    }
    return kept;
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
