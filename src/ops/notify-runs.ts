// The run events, from the hook where they happen: every final outcome `work` records names its run, and
// the runs named since the last look are read (their counters, one read per organization) a moment
// later, together: a burst of outcomes costs one look, an idle process none. A run with no learner
// waiting has finished; one whose finished learners fail above NOTIFY_FAILURE_SHARE is said once.
import type { Logger } from '../core/log.ts';
import { progressOf } from '../outcomes/run-progress.ts';
import type { Runs } from '../outcomes/runs.ts';
import type { OutcomeStore } from '../outcomes/store.ts';
import { runFailures, runFinished, type NotifyEvent } from './notify-events.ts';

/** A share of failures is judged once this many learners of the run finished (or all, in a smaller run). */
export const FAILURE_MIN_FINISHED = 20;
/** Runs remembered between two looks at most (a look takes them all). */
const MAX_DIRTY = 10_000;

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
  readonly #dirty = new Set<string>();
  #timer: NodeJS.Timeout | undefined;
  #looking: Promise<void> | undefined;
  #closed = false;

  constructor(options: RunWatchOptions) {
    this.#o = options;
  }

  /** A final outcome of this run was recorded (called on the transfer path: no I/O here). */
  note(runId: string): void {
    if (this.#closed) return;
    if (this.#dirty.size < MAX_DIRTY) this.#dirty.add(runId);
    if (this.#timer || this.#looking) return;
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
    const ids = [...this.#dirty];
    this.#dirty.clear();
    this.#looking = this.#lookAt(ids).finally(() => {
      this.#looking = undefined;
      if (this.#dirty.size > 0 && !this.#closed) this.note([...this.#dirty][0] as string);
    });
    await this.#looking;
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  async #lookAt(ids: readonly string[]): Promise<void> {
    const { runs, store, logger, failureShare, submit } = this.#o;
    for (const id of ids) {
      try {
        const meta = await runs.get(id);
        if (!meta || meta.orgs.length === 0) continue;
        const { total } = await runs.counts(store, meta);
        const p = progressOf(total);
        const finished = p.done + p.failed;
        const now = new Date();
        if (
          p.failed > 0 &&
          finished >= Math.min(FAILURE_MIN_FINISHED, p.total) &&
          p.failed / finished >= failureShare
        ) {
          submit(runFailures(id, meta.orgs, total, failureShare, now));
        }
        if (p.total > 0 && p.waiting === 0) submit(runFinished(id, meta.orgs, total, meta.driftReport, now));
      } catch (err) {
        logger.warn({ runId: id, err: (err as Error).message }, 'notifications: could not read a run');
      }
    }
  }
}
