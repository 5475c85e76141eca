// `work`: one BullMQ Worker per organization queue in this process, sharing one limiter and one client.
// Any number of such processes on any hosts share the queues and the budget through Redis.
import { Worker, type Job } from 'bullmq';
import type { AppContext } from '../app/context.ts';
import { jobCounts } from '../queue/queues.ts';
import { transferJobSchema, type TransferJob } from '../queue/job.ts';
import { isFinalBucket, isSuccessBucket, type Bucket } from '../outcomes/record.ts';
import { progressOf } from '../outcomes/run-progress.ts';
import { scrubSecrets } from '../core/log.ts';
import { createProcessor, type OutcomeEvent, type ProcessResult } from './processor.ts';
import { closeRedis, createRedis } from '../redis/client.ts';
import { countHourly } from '../outcomes/hourly.ts';
import { Recorder, type WriteGateLike } from './recorder.ts';
import { Spool } from './spool.ts';
import { BodyArchive } from './body-archive.ts';
import { repairOrg, formatRepair } from '../ops/repair.ts';
import { LogThrottle } from '../core/log-throttle.ts';
import { WriteGate } from '../redis/writes.ts';
import { permissionDenial, permissionSentence, redisUser } from '../redis/permission-denial.ts';
import { pauseOnPermissionError, PERMISSION_RETRY_MS } from './permission-pause.ts';
import { LearnerTransferError } from '../core/errors.ts';

export interface WorkOptions {
  orgs: readonly string[];
  concurrency: number;
  /** Exit when no job is waiting, delayed or active in the served queues. */
  untilIdle: boolean;
  idleCheckMs?: number;
  /** BullMQ lock: a job whose worker died is taken back after about this long. */
  lockDurationMs?: number;
  stalledIntervalMs?: number;
  onOutcome?: (e: OutcomeEvent) => void;
  /**
   * The write gate (Redis takes writes?): no call is sent while it is closed, and refused writes close it.
   * Absent: only the recorder's own retries stand between a refusing Redis and a lost response.
   */
  gate?: (WriteGateLike & { waitOpen(): Promise<void> }) | undefined;
  /** false: no write-ahead spool (the benchmark's baseline only; a response could then be lost). */
  spool?: boolean;
}

export interface WorkResult {
  /** Final outcomes this process recorded. */
  succeeded: number;
  failed: number;
  /** Organizations that stopped because every token was refused (401) while work waited. */
  unauthorizedOrgs: string[];
  reason: 'idle' | 'stopped' | 'unauthorized';
  /**
   * With untilIdle, at idle: learners in a failure state in the runs this process worked on (those with
   * learners waiting when it started, and those it recorded outcomes for), in the organizations it
   * served, whichever process finished them. A nightly `work --until-idle` exits non-zero on these.
   */
  runFailures: number;
}

export interface WorkHandle {
  /** Resolves when the workers stop (idle, stop(), or every remaining org blocked by 401). */
  done: Promise<WorkResult>;
  /** The write gate's state (Redis takes writes?), for metrics. */
  writeState(): import('../redis/writes.ts').WriteState | undefined;
  stop(): Promise<void>;
  workers: Worker[];
}

export function startWorkers(ctx: AppContext, options: WorkOptions): WorkHandle {
  if (!ctx.client)
    throw new LearnerTransferError('LT_CONFIG_INVALID', 'startWorkers needs LEARNER_API_BASE_URL');
  const counts = { succeeded: 0, failed: 0 };
  const runsServed = new Set<string>();
  let runFailures = 0;
  // Send nothing that cannot be recorded: the gate closes on a refused write or above the high-water mark.
  const ownGate = options.gate
    ? undefined
    : new WriteGate(ctx.redis, {
        probeKey: ctx.keys.writeProbe(),
        highWater: ctx.config.redisHighWater,
        logger: ctx.logger,
      });
  const gateAbort = new AbortController();
  const gate = options.gate ?? {
    noteError: (err: unknown) => ownGate?.noteError(err) ?? false,
    waitOpen: () => ownGate?.waitOpen(gateAbort.signal) ?? Promise.resolve(),
  };
  const replicated = (org: string) => ctx.durability.replicated(ctx.keys.outcomes(org));
  const recorder = new Recorder({
    store: ctx.store,
    logger: ctx.logger,
    replicated,
    ...(gate ? { gate } : {}),
  });
  const processor = createProcessor({
    config: ctx.config,
    client: ctx.client,
    budget: ctx.budget,
    store: ctx.store,
    claims: ctx.claims,
    keys: ctx.keys,
    queues: ctx.queues,
    recorder,
    ...(gate ? { waitWritable: () => gate.waitOpen() } : {}),
    replicated,
    logger: ctx.logger,
    // Unreadable bodies are kept whole beside the spool, on the same persistent disk.
    ...(options.spool !== false ? { archive: new BodyArchive(ctx.config.spoolDir) } : {}),
    onOutcome: (e) => {
      countHourly(ctx.redis, ctx.keys, e.org, e.code).catch((err: Error) =>
        ctx.logger.warn({ err: err.message }, 'hourly count failed'),
      );
      if (e.final) {
        if (isSuccessBucket(e.bucket)) counts.succeeded++;
        else counts.failed++;
      }
      runsServed.add(e.runId);
      options.onOutcome?.(e);
    },
  });
  // BullMQ workers block on their own connection; one shared connection for their normal commands.
  const connection = createRedis(ctx.config.redis, 'learner-transfer-worker');
  // While Redis is down every worker reports the same error many times a second: log it as one.
  const errors = new LogThrottle(ctx.logger);
  connection.on('error', (err) => errors.warn({ err: err.message }, 'worker redis connection error'));
  const permissionPauses: { stop(): void }[] = [];
  const workers = options.orgs.map((org) => {
    const w = new Worker<TransferJob, ProcessResult>(
      ctx.keys.queueName(org),
      (job: Job<TransferJob>, token) => processor(job, token),
      {
        connection,
        prefix: ctx.keys.prefix,
        concurrency: options.concurrency,
        lockDuration: options.lockDurationMs ?? 30_000,
        stalledInterval: options.stalledIntervalMs ?? options.lockDurationMs ?? 30_000,
        // A learner whose worker was killed comes back; many kills in a row must not fail it.
        maxStalledCount: 20,
        // A wait for budget is one sleep, however long (BullMQ caps it at 30 s by default, which would
        // wake every worker twice a minute through a day-long wait). close() cuts the sleep short.
        maximumRateLimitDelay: 86_400_000,
        // Started once the spools of earlier processes are replayed (boot below).
        autorun: false,
      },
    );
    w.on('error', (err) => {
      gate.noteError(err);
      // A refusal by Redis's ACL is said by the permission pause below, with the rule to grant.
      if (!permissionDenial(err)) errors.warn({ org, err: err.message }, 'worker error');
    });
    permissionPauses.push(
      pauseOnPermissionError(w, {
        onDenied: (err, denial) =>
          errors.log(
            'error',
            { org, err: err.message },
            `${permissionSentence(redisUser(ctx.config.redis), [denial], ctx.keys.prefix)}; ` +
              `the worker tries again every ${PERMISSION_RETRY_MS / 1000} s`,
          ),
        // The write gate may hold the workers too: it resumes them itself when Redis takes writes again.
        mayResume: () => ownGate?.state.writable ?? true,
      }),
    );
    w.on('failed', (job, err) => {
      if (!job) return;
      const p = finalizeStranded(ctx, job, err)
        .then((finalized) => {
          if (finalized) counts.failed++;
        })
        .catch((e: Error) =>
          ctx.logger.warn({ org, jobId: job.id, err: e.message }, 'could not record a failed job'),
        )
        .finally(() => pending.delete(p));
      pending.add(p);
    });
    return w;
  });
  /** Records of jobs that BullMQ failed on its own, still being written. */
  const pending = new Set<Promise<void>>();

  let stopping: Promise<void> | undefined;
  let resolveDone: (r: WorkResult) => void = () => {};
  const done = new Promise<WorkResult>((resolve) => (resolveDone = resolve));
  let reason: WorkResult['reason'] = 'stopped';
  let unauthorizedOrgs: string[] = [];
  let timer: NodeJS.Timeout | undefined;
  let repairTimer: NodeJS.Timeout | undefined;
  let spool: Spool | undefined;
  const bootAbort = new AbortController();

  const repair = async (): Promise<number> => {
    let readded = 0;
    for (const org of options.orgs) {
      const r = await repairOrg(ctx, org);
      readded += r.readded + r.recorded;
      if (r.stranded + r.orphanJobs > 0) ctx.logger.warn({ ...r }, `repair: ${formatRepair(r)}`);
    }
    return readded;
  };

  // Before taking a job: replay what earlier processes left in the spool, then open this one's.
  const booted = (async () => {
    await ownGate?.start();
    await recorder.replay(ctx.config.spoolDir, ctx.keys.prefix, bootAbort.signal);
    if (options.spool !== false) {
      spool = await Spool.open(ctx.config.spoolDir, ctx.keys.prefix);
      recorder.attachSpool(spool);
    }
    if (stopping) return;
    await repair().catch((err: Error) => ctx.logger.warn({ err: err.message }, 'repair sweep failed'));
    if (stopping) return;
    for (const w of workers) {
      w.run().catch((err: Error) => ctx.logger.error({ err: err.message }, 'worker stopped on an error'));
    }
    // While Redis refuses writes, BullMQ's loop would fail to fetch a job thousands of times a second
    // (it does not back off on OOM or READONLY): the workers stop fetching until the gate opens.
    // The jobs in hand go on (their responses wait to be recorded).
    ownGate?.onChange((next, prev) => {
      if (stopping) return;
      if (prev.writable && !next.writable) for (const w of workers) void w.pause(true).catch(() => {});
      else if (!prev.writable && next.writable) for (const w of workers) void w.resume().catch(() => {});
    });
    repairTimer = setInterval(() => {
      repair().catch((err: Error) => ctx.logger.warn({ err: err.message }, 'repair sweep failed'));
    }, ctx.config.repairIntervalMs);
    repairTimer.unref();
  })();
  booted.catch((err: Error) => {
    ctx.logger.error({ err: err.message }, 'work could not start: replaying the spool failed');
    void stop();
  });

  const stop = async () => {
    stopping ??= (async () => {
      if (timer) clearInterval(timer);
      if (repairTimer) clearInterval(repairTimer);
      bootAbort.abort();
      gateAbort.abort();
      for (const p of permissionPauses) p.stop();
      await booted.catch(() => {});
      ctx.logger.debug({ reason }, 'stopping: closing the workers');
      // close() waits for the jobs in flight to finish (their requests are bounded by the timeout). After
      // a Redis Cluster failover, BullMQ's close can wait for ever for its blocking connection to end
      // (seen in bench/ha.ts): past the request timeout and a margin, no job of ours is still running,
      // so the stop goes on (what a job had in hand is recorded or in the spool).
      const closeMs = ctx.config.requestTimeoutMs + 5_000;
      await Promise.all(
        workers.map(async (w) => {
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
        }),
      );
      await Promise.all([...pending]);
      await spool?.close();
      ownGate?.stop();
      ctx.logger.debug('stopping: workers closed, closing the Redis connection');
      await closeRedis(connection);
      errors.stop();
      resolveDone({ ...counts, unauthorizedOrgs, reason, runFailures });
    })();
    return stopping;
  };

  if (options.untilIdle) {
    // The runs with learners waiting now: their outcomes decide the exit code, whoever finishes them.
    const startedRuns = pendingRuns(ctx, options.orgs).then((ids) => ids.forEach((id) => runsServed.add(id)));
    let checking = false;
    // What the idle check waits for, at debug level, at most every 5 s: a run that does not end says why.
    let lastWhy = 0;
    const why = (fields: Record<string, unknown>) => {
      if (Date.now() - lastWhy < 5000) return;
      lastWhy = Date.now();
      ctx.logger.debug(fields, 'until-idle: not idle yet');
    };
    timer = setInterval(() => {
      if (checking || stopping) return;
      checking = true;
      void (async () => {
        if (pending.size > 0) return why({ failedJobsBeingRecorded: pending.size });
        const pendingOrgs: string[] = [];
        const jobs: Record<string, unknown> = {};
        for (const org of options.orgs) {
          const c = await jobCounts(ctx.queues.get(org));
          if (c.waiting + c.active + c.delayed + c.prioritized > 0) {
            pendingOrgs.push(org);
            jobs[org] = c;
          }
        }
        if (pendingOrgs.length > 0) why({ jobs });
        if (pendingOrgs.length === 0) {
          await booted;
          // Records still waiting for Redis first (cheap), then a sweep (a scan): learners waiting with
          // no job would never finish, so they are re-added before this calls it idle.
          if (recorder.waiting > 0) return why({ recordsWaitingForRedis: recorder.waiting });
          const readded = await repair();
          if (readded > 0) return why({ readdedByRepair: readded });
          await startedRuns;
          runFailures = await failuresIn(ctx, [...runsServed], options.orgs);
          reason = 'idle';
          await stop();
          return;
        }
        // Work that only a refused token could do will never finish: say so and stop, instead of hanging.
        const stuck: string[] = [];
        for (const org of pendingOrgs) {
          const tokenIds = ctx.config.tokens.filter((t) => t.org === org).map((t) => t.id);
          const view = await ctx.budget.peek(org, tokenIds);
          if (view.tokens.length > 0 && view.tokens.every((t) => t.blocked?.reason === '401'))
            stuck.push(org);
        }
        if (stuck.length === pendingOrgs.length) {
          reason = 'unauthorized';
          unauthorizedOrgs = stuck;
          await stop();
        }
      })()
        .catch((err: Error) => ctx.logger.warn({ err: err.message }, 'idle check failed'))
        .finally(() => {
          checking = false;
        });
    }, options.idleCheckMs ?? 1000);
  }

  return { done, stop, workers, writeState: () => ownGate?.state };
}

/**
 * BullMQ fails a job on its own when it stalled more than maxStalledCount times, or when the processor
 * threw something that is not a classified outcome (a Redis error inside the job, a bug) until its
 * attempts ran out. Its learner would stay `queued` or `retrying` with no job to move it: give it the
 * final state `worker-error`, which a person sees on the dashboard and can retry. Returns true when it did.
 */
async function finalizeStranded(ctx: AppContext, job: Job<TransferJob>, err: Error): Promise<boolean> {
  const parsed = transferJobSchema.safeParse(job.data);
  if (!parsed.success) return false;
  if ((await job.getState()) !== 'failed') return false; // it will be retried
  const { org, learnerId, runId } = parsed.data;
  const record = await ctx.store.get(org, learnerId);
  if (record && isFinalBucket(record.b as Bucket)) return false; // the processor recorded it
  const secrets = ctx.config.tokens.map((t) => t.secret);
  await ctx.store.recordAttempt(org, learnerId, runId, {
    bucket: 'worker-error',
    code: 'worker-error',
    error: 'worker',
    message: scrubSecrets(`the worker could not finish this job: ${err.message}`, secrets).slice(0, 1000),
    durationMs: 0,
    countsAsAttempt: false,
  });
  ctx.logger.error(
    { org, learnerId, runId, reason: err.message },
    'job failed in the worker: learner marked worker-error',
  );
  return true;
}

/** Runs (newest 500) that have learners queued or retrying in any of the organizations. */
async function pendingRuns(ctx: AppContext, orgs: readonly string[]): Promise<string[]> {
  const runs = await ctx.runs.list(500);
  // One read per run and organization, all in flight together (ioredis pipelines them on one socket).
  const waiting = await Promise.all(
    runs.map(async (run) => {
      const counts = await Promise.all(orgs.map((org) => ctx.store.runCounts(org, run.id)));
      return counts.some((c) => progressOf(c).waiting > 0);
    }),
  );
  return runs.filter((_, i) => waiting[i]).map((r) => r.id);
}

/** Learners in a failure state in these runs and organizations. */
async function failuresIn(
  ctx: AppContext,
  runIds: readonly string[],
  orgs: readonly string[],
): Promise<number> {
  let n = 0;
  for (const runId of runIds) {
    for (const org of orgs) {
      n += progressOf(await ctx.store.runCounts(org, runId)).failed;
    }
  }
  return n;
}
