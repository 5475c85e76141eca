// A `work` process's queue workers from boot to stop: the spools of earlier processes replayed before any
// job is taken, the repair sweeps, the write gate holding the workers, the until-idle check, and a stop
// that lets the jobs in hand finish and record.
import type { Worker } from 'bullmq';
import type { AppContext } from '../app/context.ts';
import type { LogThrottle } from '../core/log-throttle.ts';
import { formatRepair, repairOrg } from '../ops/repair.ts';
import { closeRedis, type RedisClient } from '../redis/client.ts';
import type { WriteGate } from '../redis/writes.ts';
import type { Recorder } from './recorder.ts';
import { Spool } from './spool.ts';
import { failuresIn, orgsWithJobs, pendingRuns, refusedOrgs } from './until-idle.ts';
import type { WorkOptions, WorkResult } from './work-options.ts';

/** What startWorkers built, handed to the session that runs and stops it. */
export interface WorkParts {
  ctx: AppContext;
  options: WorkOptions;
  ownGate: WriteGate | undefined;
  gateAbort: AbortController;
  recorder: Recorder;
  connection: RedisClient;
  errors: LogThrottle;
  workers: Worker[];
  permissionPauses: { stop(): void }[];
  /** Records of jobs that BullMQ failed on its own, still being written. */
  pending: Set<Promise<void>>;
  counts: { succeeded: number; failed: number };
  runsServed: Set<string>;
}

export class WorkSession {
  /** Resolves when the workers stop (idle, stop(), or every remaining org blocked by 401). */
  readonly done: Promise<WorkResult>;
  readonly #parts: WorkParts;
  #resolveDone: (r: WorkResult) => void = () => {};
  #stopping: Promise<void> | undefined;
  #reason: WorkResult['reason'] = 'stopped';
  #unauthorizedOrgs: string[] = [];
  #runFailures = 0;
  #timer: NodeJS.Timeout | undefined;
  #repairTimer: NodeJS.Timeout | undefined;
  #spool: Spool | undefined;
  readonly #bootAbort = new AbortController();
  readonly #booted: Promise<void>;
  #checking = false;
  #lastWhy = 0;

  constructor(parts: WorkParts) {
    this.#parts = parts;
    this.done = new Promise<WorkResult>((resolve) => (this.#resolveDone = resolve));
    // Before taking a job: replay what earlier processes left in the spool, then open this one's.
    this.#booted = this.#boot();
    this.#booted.catch((err: Error) => {
      parts.ctx.logger.error({ err: err.message }, 'work could not start: replaying the spool failed');
      void this.stop();
    });
    if (parts.options.untilIdle) this.#watchUntilIdle();
  }

  async #repair(): Promise<number> {
    const { ctx, options } = this.#parts;
    let readded = 0;
    for (const org of options.orgs) {
      const r = await repairOrg(ctx, org);
      readded += r.readded + r.recorded;
      if (r.stranded + r.orphanJobs > 0) ctx.logger.warn({ ...r }, `repair: ${formatRepair(r)}`);
    }
    return readded;
  }

  async #boot(): Promise<void> {
    const { ctx, options, ownGate, recorder, workers } = this.#parts;
    await ownGate?.start();
    await recorder.replay(ctx.config.spoolDir, ctx.keys.prefix, this.#bootAbort.signal);
    if (options.spool !== false) {
      this.#spool = await Spool.open(ctx.config.spoolDir, ctx.keys.prefix);
      recorder.attachSpool(this.#spool);
    }
    if (this.#stopping) return;
    await this.#repair().catch((err: Error) => ctx.logger.warn({ err: err.message }, 'repair sweep failed'));
    if (this.#stopping) return;
    for (const w of workers) {
      w.run().catch((err: Error) => ctx.logger.error({ err: err.message }, 'worker stopped on an error'));
    }
    // While Redis refuses writes, BullMQ's loop would fail to fetch a job thousands of times a second
    // (it does not back off on OOM or READONLY): the workers stop fetching until the gate opens.
    // The jobs in hand go on (their responses wait to be recorded).
    ownGate?.onChange((next, prev) => {
      if (this.#stopping) return;
      if (prev.writable && !next.writable) for (const w of workers) void w.pause(true).catch(() => {});
      else if (!prev.writable && next.writable) for (const w of workers) void w.resume().catch(() => {});
    });
    this.#repairTimer = setInterval(() => {
      this.#repair().catch((err: Error) => ctx.logger.warn({ err: err.message }, 'repair sweep failed'));
    }, ctx.config.repairIntervalMs);
    this.#repairTimer.unref();
  }

  stop(): Promise<void> {
    this.#stopping ??= this.#close();
    return this.#stopping;
  }

  async #close(): Promise<void> {
    const { ctx, ownGate, gateAbort, permissionPauses, workers, pending, connection, errors } = this.#parts;
    if (this.#timer) clearInterval(this.#timer);
    if (this.#repairTimer) clearInterval(this.#repairTimer);
    this.#bootAbort.abort();
    gateAbort.abort();
    for (const p of permissionPauses) p.stop();
    await this.#booted.catch(() => {});
    ctx.logger.debug({ reason: this.#reason }, 'stopping: closing the workers');
    await Promise.all(workers.map((w) => closeWorker(ctx, w)));
    await Promise.all([...pending]);
    await this.#spool?.close();
    ownGate?.stop();
    ctx.logger.debug('stopping: workers closed, closing the Redis connection');
    await closeRedis(connection);
    errors.stop();
    this.#resolveDone({
      ...this.#parts.counts,
      unauthorizedOrgs: this.#unauthorizedOrgs,
      reason: this.#reason,
      runFailures: this.#runFailures,
    });
  }

  #watchUntilIdle(): void {
    const { ctx, options, runsServed } = this.#parts;
    // The runs with learners waiting now: their outcomes decide the exit code, whoever finishes them.
    const startedRuns = pendingRuns(ctx, options.orgs).then((ids) => ids.forEach((id) => runsServed.add(id)));
    this.#timer = setInterval(() => {
      if (this.#checking || this.#stopping) return;
      this.#checking = true;
      void this.#checkIdle(startedRuns)
        .catch((err: Error) => ctx.logger.warn({ err: err.message }, 'idle check failed'))
        .finally(() => {
          this.#checking = false;
        });
    }, options.idleCheckMs ?? 1000);
  }

  /** What the idle check waits for, at debug level, at most every 5 s: a run that does not end says why. */
  #why(fields: Record<string, unknown>): void {
    if (Date.now() - this.#lastWhy < 5000) return;
    this.#lastWhy = Date.now();
    this.#parts.ctx.logger.debug(fields, 'until-idle: not idle yet');
  }

  async #checkIdle(startedRuns: Promise<void>): Promise<void> {
    const { ctx, options, pending, recorder, runsServed } = this.#parts;
    if (pending.size > 0) return this.#why({ failedJobsBeingRecorded: pending.size });
    const { pendingOrgs, jobs } = await orgsWithJobs(ctx, options.orgs);
    if (pendingOrgs.length > 0) this.#why({ jobs });
    if (pendingOrgs.length === 0) {
      await this.#booted;
      // Records still waiting for Redis first (cheap), then a sweep (a scan): learners waiting with
      // no job would never finish, so they are re-added before this calls it idle.
      if (recorder.waiting > 0) return this.#why({ recordsWaitingForRedis: recorder.waiting });
      const readded = await this.#repair();
      if (readded > 0) return this.#why({ readdedByRepair: readded });
      await startedRuns;
      this.#runFailures = await failuresIn(ctx, [...runsServed], options.orgs);
      this.#reason = 'idle';
      await this.stop();
      return;
    }
    // Work that only a refused token could do will never finish: say so and stop, instead of hanging.
    const stuck = await refusedOrgs(ctx, pendingOrgs);
    if (stuck.length === pendingOrgs.length) {
      this.#reason = 'unauthorized';
      this.#unauthorizedOrgs = stuck;
      await this.stop();
    }
  }
}

/**
 * close() waits for the jobs in flight to finish (their requests are bounded by the timeout). After a
 * Redis Cluster failover, BullMQ's close can wait for ever for its blocking connection to end (seen in
 * bench/ha.ts): past the request timeout and a margin, no job of ours is still running, so the stop goes
 * on (what a job had in hand is recorded or in the spool).
 */
async function closeWorker(ctx: AppContext, w: Worker): Promise<void> {
  const closeMs = ctx.config.requestTimeoutMs + 5_000;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), closeMs)));
  const closed = await Promise.race([w.close().then(() => 'closed' as const), late]);
  clearTimeout(timer);
  if (closed === 'late') {
    ctx.logger.warn(
      { worker: w.name, waitedMs: closeMs },
      'a queue worker did not close in time (its Redis connection is stuck): stopping without it',
    );
    void w.close(true).catch(() => {});
  }
}
