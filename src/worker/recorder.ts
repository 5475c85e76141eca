// Records the end of every attempt without losing a response: spooled first, then the finish script
// (decision 9). While Redis refuses writes the attempt keeps trying, its lease held (docs/guarantees.md).
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../core/log.ts';
import type { FinishArgs, FinishResult, OutcomeStore } from '../outcomes/store.ts';
import { abandonedSpools, readSpool, takeSpool, type Spool } from './spool.ts';
import { unlink, utimes } from 'node:fs/promises';
import { faultPoint } from '../core/fault.ts';
import { isWriteRefusal } from '../redis/refusals.ts';

/** What the recorder needs of the write gate: hear a refused write, and say whether to keep sending. */
export interface WriteGateLike {
  noteError(err: unknown): boolean;
  /** A closed gate's reopening ends a retry's wait (redis/writes.ts WriteGate has both). */
  readonly isOpen?: boolean;
  waitOpen?(signal?: AbortSignal): Promise<void>;
}

/** Busy or moving rather than refusing (a script running, a cluster slot migrating). */
const BUSY = /^(LOADING|BUSY|CLUSTERDOWN|TRYAGAIN|MASTERDOWN|NOSCRIPT)/;

/**
 * Errors that mean Redis could not take the write now and may later (the gate's refusals, the same
 * list, plus busy or moving): waited out for as long as it takes. Any other error (a script bug) is
 * tried a few times and then thrown: the job fails and a spooled response stays in the spool.
 */
function transient(err: unknown): boolean {
  return isWriteRefusal(err) !== undefined || BUSY.test((err as Error)?.message ?? '');
}
const OTHER_TRIES = 5;

const RETRY_MIN_MS = 200;
const RETRY_MAX_MS = 2_000;
const LOG_EVERY_MS = 10_000;

export class Recorder {
  readonly #store: OutcomeStore;
  #spool: Spool | undefined;
  readonly #logger: Logger;
  readonly #gate: WriteGateLike | undefined;
  #failing = 0;
  #lastLog = 0;
  #waiting = 0;
  readonly #replicated: ((org: string) => Promise<unknown>) | undefined;

  constructor(deps: {
    store: OutcomeStore;
    spool?: Spool | undefined;
    logger: Logger;
    gate?: WriteGateLike;
    /** WAIT for a replica of the org's master (redis/durability.ts) before the spool entry is retired. */
    replicated?: (org: string) => Promise<unknown>;
  }) {
    this.#replicated = deps.replicated;
    this.#store = deps.store;
    this.#spool = deps.spool;
    this.#logger = deps.logger;
    this.#gate = deps.gate;
  }

  /** The spool this process writes (opened after the replay of earlier ones). */
  attachSpool(spool: Spool): void {
    this.#spool = spool;
  }

  /** Attempts whose record waits for Redis now (their leases stay held). */
  get waiting(): number {
    return this.#waiting;
  }

  /**
   * Spools (when `effectful`) and writes the attempt; resolves once it is in Redis, however long Redis
   * refuses. `signal` ends the wait (shutdown): a spooled attempt then stays in the spool.
   */
  async record(args: FinishArgs, effectful: boolean, signal?: AbortSignal): Promise<FinishResult> {
    const spoolId = effectful && this.#spool ? await this.#spool.append(args) : undefined;
    if (spoolId) faultPoint('after-spool');
    const result = await this.#finish(args, signal);
    // The audit entry and the record must outlive a failover before the response leaves the spool.
    await this.#replicated?.(args.org);
    faultPoint('after-finish');
    if (spoolId) await this.#spool?.done(spoolId);
    return result;
  }

  async #finish(args: FinishArgs, signal?: AbortSignal): Promise<FinishResult> {
    let delay = RETRY_MIN_MS;
    let counted = false;
    let others = 0;
    try {
      for (;;) {
        try {
          const result = await this.#store.finish(args);
          if (counted) {
            counted = false;
            this.#waiting--;
            if (--this.#failing === 0) this.#logger.info('Redis takes the outcome writes again');
          }
          return result;
        } catch (err) {
          if (signal?.aborted) throw err;
          this.#gate?.noteError(err);
          if (!transient(err) && ++others >= OTHER_TRIES) throw err;
          if (!counted) {
            counted = true;
            this.#waiting++;
            this.#failing++;
          }
          const now = Date.now();
          if (now - this.#lastLog >= LOG_EVERY_MS) {
            this.#lastLog = now;
            this.#logger.error(
              { err: (err as Error).message, waiting: this.#waiting },
              'Redis refused an outcome write: the attempts wait with their leases held (their responses are in the spool) and are written when Redis takes writes again',
            );
          }
          await this.#pause(delay, signal);
          delay = Math.min(RETRY_MAX_MS, delay * 2);
        }
      }
    } finally {
      if (counted) {
        this.#waiting--;
        this.#failing--;
      }
    }
  }

  /**
   * Waits `ms` before the next try, or less when the gate was closed and reopens: the write goes the
   * moment Redis takes writes again, not at the end of a backoff of up to RETRY_MAX_MS (until then a
   * closing lane waits for this job, and a crash meanwhile would keep it waiting longer).
   */
  async #pause(ms: number, signal?: AbortSignal): Promise<void> {
    const done = new AbortController();
    const stop = () => done.abort();
    signal?.addEventListener('abort', stop, { once: true });
    const gate = this.#gate;
    // Only a reopening ends the wait early: a wait for it that was aborted (a stop) leaves the sleep to run.
    if (gate?.waitOpen && gate.isOpen === false) gate.waitOpen(done.signal).then(stop, () => {});
    try {
      await sleep(ms, undefined, { signal: done.signal }).catch(() => {});
    } finally {
      done.abort();
      signal?.removeEventListener('abort', stop);
    }
  }

  /**
   * Replays spool files of this prefix left by processes that are gone, before this one takes jobs.
   * Each entry is written once whatever happened before (the finish script is idempotent).
   */
  async replay(
    dir: string,
    prefix: string,
    signal?: AbortSignal,
  ): Promise<{ files: number; entries: number }> {
    let files = 0;
    let entries = 0;
    for (const path of abandonedSpools(dir, prefix)) {
      const taken = await takeSpool(path);
      if (!taken) continue;
      files++;
      const pending = await readSpool(taken);
      // A long replay (Redis refusing writes) keeps the file looking alive to replayers on other hosts.
      const touch = setInterval(() => {
        const now = new Date();
        utimes(taken, now, now).catch(() => {});
      }, 30_000);
      try {
        for (const e of pending) {
          await this.#finish(e.args, signal);
          entries++;
        }
      } finally {
        clearInterval(touch);
      }
      await unlink(taken).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'ENOENT') throw err;
      });
    }
    if (files > 0) {
      this.#logger.info(
        { files, entries, dir },
        `replayed ${entries} responses from ${files} spool files left by earlier processes`,
      );
    }
    return { files, entries };
  }
}
