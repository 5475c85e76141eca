// A `work` process's queue workers from boot (spools replayed, repair sweeps) to a stop that lets the
// jobs in hand finish and record.
import type { AppContext } from '../app/context.ts';
import type { LogThrottle } from '../core/log-throttle.ts';
import { formatRepair, repairOrg } from '../ops/actions/repair.ts';
import { compactOldRuns, RUN_RETENTION_INTERVAL_MS } from '../ops/actions/run-retention.ts';
import { closeRedis, type RedisClient } from '../redis/client.ts';
import type { WriteGate } from '../redis/writes.ts';
import type { Recorder } from './recorder.ts';
import { Spool } from './spool.ts';
import {
  approvalsIn,
  failuresIn,
  haltedOrgs,
  orgsWithJobs,
  pendingRuns,
  refusedOrgs,
  type AwaitingApproval,
  type HaltedOrg,
} from './until-idle.ts';
import type { LaneDispatcher } from './lanes.ts';
import { LanesDue } from '../queue/lanes-due.ts';
import { hasJobs, laneJobs } from '../queue/lane-state.ts';
import type { WorkOptions, WorkResult } from './work-options.ts';

/** What startWorkers built, handed to the session that runs and stops it. */
export interface WorkParts {
  ctx: AppContext;
  options: WorkOptions;
  ownGate: WriteGate | undefined;
  gateAbort: AbortController;
  recorder: Recorder;
  connection: RedisClient;
  subscriber: RedisClient;
  errors: LogThrottle;
  lanes: LaneDispatcher;
  /** The lanes this process serves: its organizations, and the control lane when it serves it. */
  served: readonly string[];
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
  #haltedOrgs: HaltedOrg[] = [];
  #runFailures = 0;
  #awaitingApproval: AwaitingApproval[] = [];
  #timer: NodeJS.Timeout | undefined;
  #repairTimer: NodeJS.Timeout | undefined;
  #retentionTimer: NodeJS.Timeout | undefined;
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
      parts.ctx.logger.error(
        { err: err.message },
        'work could not start (the spool replay, the repair sweep or the lanes failed)',
      );
      void this.stop();
    });
    if (parts.options.untilIdle) this.#watchUntilIdle();
  }

  /** The repair sweep over these organizations (at boot and at idle: all; on the interval: those worked). */
  async #repair(orgs: readonly string[] = this.#parts.options.orgs): Promise<number> {
    const { ctx } = this.#parts;
    let readded = 0;
    for (const org of orgs) {
      const r = await repairOrg(ctx, org);
      readded += r.readded + r.recorded;
      this.#parts.options.onRepair?.(r);
      if (r.stranded + r.orphanJobs > 0) ctx.logger.warn({ ...r }, `repair: ${formatRepair(r)}`);
    }
    return readded;
  }

  async #boot(): Promise<void> {
    const { ctx, options, ownGate, recorder, lanes } = this.#parts;
    await ownGate?.start();
    await recorder.replay(ctx.config.spoolDir, ctx.keys.prefix, this.#bootAbort.signal);
    if (options.spool !== false) {
      this.#spool = await Spool.open(ctx.config.spoolDir, ctx.keys.prefix);
      recorder.attachSpool(this.#spool);
    }
    if (this.#stopping) return;
    await this.#repair().catch((err: Error) => ctx.logger.warn({ err: err.message }, 'repair sweep failed'));
    if (this.#stopping) return;
    await this.#writing(() => this.#markLanesWithJobs());
    if (this.#stopping) return;
    // While Redis refuses writes, BullMQ would re-fetch without backoff: the workers stop fetching until
    // the gate opens. The jobs in hand go on.
    ownGate?.onChange((next, prev) => {
      if (this.#stopping) return;
      if (prev.writable && !next.writable) lanes.pause();
      else if (!prev.writable && next.writable) lanes.resume();
    });
    await lanes.start();
    if (lanes.attachedLanes.length === 0) ownGate?.setIdle(true);
    // Only the organizations worked on since the last sweep: an idle process sweeps nothing.
    this.#repairTimer = setInterval(() => {
      const worked = new Set(lanes.takeTouched());
      const orgs = options.orgs.filter((o) => worked.has(o));
      this.#repair(orgs).catch((err: Error) => ctx.logger.warn({ err: err.message }, 'repair sweep failed'));
    }, ctx.config.repairIntervalMs);
    this.#repairTimer.unref();
    this.#startRunRetention();
  }

  /** Runs older than RUN_RETENTION compacted, now and every interval, by one process of the fleet. */
  #startRunRetention(): void {
    const { ctx } = this.#parts;
    const retentionMs = ctx.config.runRetentionMs;
    if (retentionMs <= 0) return;
    const deps = { redis: ctx.redis, keys: ctx.keys, store: ctx.store, logger: ctx.logger };
    const pass = () => {
      compactOldRuns(deps, retentionMs).catch((err: Error) =>
        ctx.logger.warn({ err: err.message }, 'run retention failed (tried again at the next interval)'),
      );
    };
    pass();
    this.#retentionTimer = setInterval(pass, RUN_RETENTION_INTERVAL_MS);
    this.#retentionTimer.unref();
  }

  /**
   * A boot step that writes: a write Redis refuses (or a lost connection) is waited out until the gate
   * finds Redis writable again, as the running workers do, not a failed start. A stop ends the wait.
   */
  async #writing(step: () => Promise<void>): Promise<void> {
    const gate = this.#parts.ownGate;
    for (;;) {
      try {
        return await step();
      } catch (err) {
        if (!gate || this.#stopping || !gate.noteError(err)) throw err;
        await gate.waitOpen(this.#parts.gateAbort.signal).catch(() => {});
        if (this.#stopping) return;
      }
    }
  }

  /**
   * Marks every served lane that has jobs due (one pipelined read for all of them): jobs added while no
   * process ran, by a release before the lanes existed, or left active by a process that died.
   */
  async #markLanesWithJobs(): Promise<void> {
    const { ctx, served } = this.#parts;
    const due = new LanesDue(ctx.redis, ctx.keys);
    const now = Date.now();
    const lanes = (await laneJobs(ctx.redis, ctx.keys, served)).filter(hasJobs);
    const later = lanes.filter((l) => l.ready + l.active === 0);
    await due.markDue(
      lanes.filter((l) => l.ready + l.active > 0).map((l) => l.lane),
      now,
    );
    for (const l of later) await due.markDue([l.lane], Math.max(now, l.firstDelayed ?? now));
  }

  /** Entries of this process's spool not yet in Redis, and when the oldest was written. */
  spoolState(): { entries: number; oldestAt: number | null } {
    return { entries: this.#spool?.outstanding ?? 0, oldestAt: this.#spool?.oldestAt ?? null };
  }

  stop(): Promise<void> {
    this.#stopping ??= this.#close();
    return this.#stopping;
  }

  async #close(): Promise<void> {
    const { ctx, ownGate, gateAbort, lanes, pending, connection, subscriber, errors } = this.#parts;
    if (this.#timer) clearInterval(this.#timer);
    if (this.#repairTimer) clearInterval(this.#repairTimer);
    if (this.#retentionTimer) clearInterval(this.#retentionTimer);
    this.#bootAbort.abort();
    gateAbort.abort();
    await this.#booted.catch(() => {});
    ctx.logger.debug({ reason: this.#reason }, 'stopping: closing the workers');
    await lanes.stop();
    await Promise.all([...pending]);
    await this.#spool?.close();
    ownGate?.stop();
    ctx.logger.debug('stopping: workers closed, closing the Redis connection');
    await Promise.all([closeRedis(connection), closeRedis(subscriber)]);
    errors.stop();
    this.#resolveDone({
      ...this.#parts.counts,
      unauthorizedOrgs: this.#unauthorizedOrgs,
      haltedOrgs: this.#haltedOrgs,
      reason: this.#reason,
      runFailures: this.#runFailures,
      awaitingApproval: this.#awaitingApproval,
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
    // The dispatcher knows without a read of every queue while work is about.
    const attached = this.#parts.lanes.attachedLanes;
    if (attached.length > 0) return this.#why({ attached: attached.slice(0, 20) });
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
      this.#awaitingApproval = await approvalsIn(ctx, [...runsServed], options.orgs);
      this.#reason = 'idle';
      await this.stop();
      return;
    }
    // Work that only a refused token could do, or that waits for a person to resume an organization the
    // error budget halted, will never finish here: say so and stop, instead of hanging.
    const stuck = await refusedOrgs(ctx, pendingOrgs);
    const halted = await haltedOrgs(
      ctx,
      pendingOrgs.filter((o) => !stuck.includes(o)),
    );
    if (stuck.length + halted.length === pendingOrgs.length) {
      this.#reason = halted.length > 0 ? 'halted' : 'unauthorized';
      this.#unauthorizedOrgs = stuck;
      this.#haltedOrgs = halted;
      await this.stop();
    }
  }
}
