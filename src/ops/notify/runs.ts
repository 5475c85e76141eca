// The run events (finished, failures past NOTIFY_FAILURE_SHARE): the runs final outcomes named since the
// last look, read together a moment later; the whole run only when the organizations read have nothing
// waiting, or at most every FULL_LOOK_MS.
import type { Logger } from '../../core/log.ts';
import { progressOf } from '../../outcomes/run-progress.ts';
import type { RunMeta, Runs } from '../../outcomes/runs.ts';
import type { OutcomeStore, RunCounts } from '../../outcomes/store.ts';
import { runFailures, runFinished, type NotifyEvent } from './events.ts';

/** A share of failures is judged once this many learners of the run finished (or all, in a smaller run). */
export const FAILURE_MIN_FINISHED = 20;
/** Runs remembered between two looks at most (a look takes them all). */
const MAX_DIRTY = 10_000;
/** A run's every organization is read at most this often while it runs (for its share of failures). */
const FULL_LOOK_MS = 30_000;

export interface RunWatchOptions {
  runs: Runs;
  store: OutcomeStore;
  logger: Logger;
  /** NOTIFY_FAILURE_SHARE. */
  failureShare: number;
  submit(event: NotifyEvent): void;
  /** How long after an outcome its run is looked at (outcomes meanwhile join the same look). */
  delayMs?: number;
}

export class RunWatch {
  readonly #o: RunWatchOptions;
  /** Run id -> the organizations that recorded a final outcome of it since the last look. */
  readonly #dirty = new Map<string, Set<string>>();
  /** Run id -> when its every organization was last read. */
  readonly #fullAt = new Map<string, number>();
  #timer: NodeJS.Timeout | undefined;
  #looking: Promise<void> | undefined;
  #closed = false;

  constructor(options: RunWatchOptions) {
    this.#o = options;
  }

  /** A final outcome of this run was recorded in `org` (called on the transfer path: no I/O here). */
  note(runId: string, org: string): void {
    if (this.#closed) return;
    const orgs = this.#dirty.get(runId);
    if (orgs) orgs.add(org);
    else if (this.#dirty.size < MAX_DIRTY) this.#dirty.set(runId, new Set([org]));
    this.#schedule();
  }

  #schedule(): void {
    if (this.#timer || this.#looking || this.#closed || this.#dirty.size === 0) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.look();
    }, this.#o.delayMs ?? 1000);
    this.#timer.unref();
  }

  /** Looks at the runs noted so far now (at a stop: the last run's end is said before the exit). */
  async look(): Promise<void> {
    while (this.#looking) await this.#looking;
    if (this.#dirty.size === 0) return;
    const dirty = [...this.#dirty];
    this.#dirty.clear();
    this.#looking = this.#lookAt(dirty).finally(() => {
      this.#looking = undefined;
      this.#schedule();
    });
    await this.#looking;
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  async #lookAt(dirty: readonly [string, Set<string>][]): Promise<void> {
    for (const [id, orgs] of dirty) {
      try {
        await this.#lookAtRun(id, orgs);
      } catch (err) {
        this.#o.logger.warn(
          { runId: id, err: (err as Error).message },
          'notifications: could not read a run',
        );
      }
    }
  }

  async #lookAtRun(id: string, touched: ReadonlySet<string>): Promise<void> {
    const { runs, failureShare, submit } = this.#o;
    const meta = await runs.get(id);
    if (!meta || meta.orgs.length === 0) return;
    const now = Date.now();
    const partial = meta.orgs.length > touched.size;
    if (partial) {
      // Still waiting where it just moved: not finished; the whole run is read now and then only.
      const some = await this.#sum(
        meta,
        [...touched].filter((o) => meta.orgs.includes(o)),
      );
      if (progressOf(some).waiting > 0 && now - (this.#fullAt.get(id) ?? 0) < FULL_LOOK_MS) return;
    }
    if (this.#fullAt.size >= MAX_DIRTY) this.#fullAt.clear();
    this.#fullAt.set(id, now);
    const total = await this.#sum(meta, meta.orgs);
    const p = progressOf(total);
    const finished = p.done + p.failed;
    const at = new Date(now);
    if (
      p.failed > 0 &&
      finished >= Math.min(FAILURE_MIN_FINISHED, p.total) &&
      p.failed / finished >= failureShare
    ) {
      submit(runFailures(id, meta.orgs, total, failureShare, at));
    }
    // Learners awaiting approval after a canary wait on a person: the run has not finished.
    if (p.total > 0 && p.waiting === 0 && p.approval === 0) {
      this.#fullAt.delete(id);
      submit(runFinished(id, meta.orgs, total, meta.driftReport, at));
    }
  }

  /** The run's counters in these organizations, summed. */
  async #sum(meta: RunMeta, orgs: readonly string[]): Promise<RunCounts> {
    if (meta.compacted) return (await this.#o.runs.counts(this.#o.store, meta)).total;
    const counts = await Promise.all(orgs.map((org) => this.#o.store.runCounts(org, meta.id)));
    const total: RunCounts = {};
    for (const c of counts) {
      for (const [k, v] of Object.entries(c))
        total[k as keyof RunCounts] = (total[k as keyof RunCounts] ?? 0) + v;
    }
    return total;
  }
}
