// The real system the outcome store model drives: two workers, each with its own spool (real files, fsynced) and
// the real recorder path (recordOutcome -> Recorder -> OutcomeStore.finish -> finish-attempt.lua), the
// real limiter's lease (acquire.lua), the real spool replay and the real repair sweep, on the real Redis.
// The only seam is a pause: a worker's finish and its spool retirement wait for the test's next command,
// so another worker, a replay or the sweep can run in between, as they can in production.
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Job } from 'bullmq';
import type { TransferOutcome } from '../../src/api/outcome.ts';
import type { Config, TokenRef } from '../../src/core/config.ts';
import type { Keys } from '../../src/core/keys.ts';
import type { Logger } from '../../src/core/log.ts';
import type { TransferBudget } from '../../src/limiter/index.ts';
import { OutcomeStore, type FinishArgs, type FinishResult } from '../../src/outcomes/store.ts';
import type { TransferJob } from '../../src/queue/job.ts';
import type { RedisClient } from '../../src/redis/client.ts';
import type { Admitted } from '../../src/worker/admission.ts';
import { AttemptPermit } from '../../src/worker/attempt-permit.ts';
import { recordOutcome, type RecordedOutcome } from '../../src/worker/outcome-record.ts';
import { processorContext, type ProcessorDeps } from '../../src/worker/processor-context.ts';
import { Recorder } from '../../src/worker/recorder.ts';
import { hostTag, Spool } from '../../src/worker/spool.ts';

interface Deferred<T> {
  promise: Promise<T>;
  resolve: (value: T) => void;
}
function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** The real store, except that a finish the test asked to hold waits for the test's go. */
class HeldStore extends OutcomeStore {
  hold: { reached: Deferred<FinishArgs>; go: Deferred<void>; done: Deferred<FinishResult> } | undefined;

  override async finish(a: FinishArgs): Promise<FinishResult> {
    const hold = this.hold;
    if (!hold) return super.finish(a);
    this.hold = undefined;
    hold.reached.resolve(a);
    await hold.go.promise;
    const result = await super.finish(a);
    hold.done.resolve(result);
    return result;
  }
}

export interface Shared {
  redis: RedisClient;
  keys: Keys;
  prefix: string;
  budget: TransferBudget;
  config: Readonly<Config>;
  token: TokenRef;
  logger: Logger;
  graceMs: number;
}

export type Stage = 'idle' | 'holding' | 'answered' | 'finished';

/** One worker process: it holds at most one attempt at a time, as one concurrency slot does. */
export class ModelWorker {
  stage: Stage = 'idle';
  incarnation = 0;
  learnerId = 0;
  holder = '';
  tookOver = false;
  /** The finish arguments of the attempt being recorded (spooled when effectful). */
  args: FinishArgs | undefined;
  effectful = false;
  result: FinishResult | undefined;
  #grant: AttemptPermit | undefined;
  #store!: HeldStore;
  #spool!: Spool;
  #recorder!: Recorder;
  #deps!: ProcessorDeps;
  #attempts = 0;
  #record: Promise<RecordedOutcome> | undefined;
  #go: Deferred<void> | undefined;
  #finished: Promise<FinishResult> | undefined;
  #retire: { reached: Deferred<void>; go: Deferred<void> } | undefined;

  private constructor(
    readonly name: string,
    readonly org: string,
    readonly runId: string,
    readonly dir: string,
    readonly shared: Shared,
  ) {}

  static async start(name: string, org: string, runId: string, dir: string, shared: Shared) {
    const w = new ModelWorker(name, org, runId, dir, shared);
    await w.#boot();
    return w;
  }

  async #boot(): Promise<void> {
    const { redis, keys, prefix, logger, config } = this.shared;
    this.incarnation++;
    this.#store = new HeldStore(redis, keys);
    this.#spool = await Spool.open(join(this.dir, `${this.name}-${this.incarnation}`), prefix);
    this.#recorder = new Recorder({
      store: this.#store,
      spool: this.#spool,
      logger,
      // Between the finish and the spool's retirement: a crash here leaves a response already recorded
      // in the spool, and its replay must add nothing.
      replicated: async () => {
        const r = this.#retire;
        if (!r) return;
        r.reached.resolve();
        await r.go.promise;
      },
    });
    // recordOutcome reads only the config, the recorder and the logger of its context.
    this.#deps = { config, recorder: this.#recorder, logger } as unknown as ProcessorDeps;
    this.stage = 'idle';
  }

  /** budget.acquire for a learner with this attempt's holder, as admission.ts's takePermit asks. */
  async acquire(learnerId: number, holder?: string) {
    this.holder = holder ?? `${this.name}.${this.incarnation}.${++this.#attempts}`;
    const { budget, token, graceMs } = this.shared;
    const permit = await budget.acquire(this.org, [token.id], {
      learnerId,
      holder: this.holder,
      lockKey: '',
      lockToken: '',
      graceMs,
    });
    if (permit.ok) {
      this.#grant = new AttemptPermit({
        recorder: this.#recorder,
        job: { org: this.org, learnerId, runId: this.runId },
        permit,
        holder: this.holder,
        askedAt: performance.now(),
        ttls: budget.keyTtls,
      });
      this.learnerId = learnerId;
      this.tookOver = permit.tookOver;
      this.stage = 'holding';
    }
    return permit;
  }

  /** admission.ts: a learner found done under its lease gets no call; the permit and lease go back. */
  async giveBack(): Promise<FinishResult> {
    const grant = this.#grant;
    if (!grant) throw new Error(`${this.name} holds no permit`);
    const r = await grant.giveBack();
    this.stage = 'idle';
    return r;
  }

  /**
   * The service's answer reaches the worker: recordOutcome decides it and records it (spooled first when
   * it may have changed something); this returns once the finish call is about to reach Redis.
   */
  async answer(outcome: TransferOutcome, attemptsMade: number, maxAttempts: number): Promise<FinishArgs> {
    const grant = this.#grant;
    if (!grant || this.stage !== 'holding') throw new Error(`${this.name} holds no permit`);
    const hold = { reached: deferred<FinishArgs>(), go: deferred(), done: deferred<FinishResult>() };
    this.#store.hold = hold;
    this.#go = hold.go;
    this.#finished = hold.done.promise;
    this.#retire = { reached: deferred(), go: deferred() };
    const job = { id: `l${this.learnerId}`, attemptsMade, opts: { attempts: maxAttempts } };
    const admitted: Admitted = {
      job: job as unknown as Job<TransferJob>,
      jobToken: undefined,
      org: this.org,
      learnerId: this.learnerId,
      runId: this.runId,
      tokens: [this.shared.token],
      grant,
      token: this.shared.token,
      current: undefined,
    };
    const ctx = processorContext(this.#deps);
    this.#record = recordOutcome(ctx, admitted, outcome);
    // A crashed worker's record never resolves; one that fails must not go unheard.
    this.#record.catch(() => {});
    const failed = this.#record.then(() => {
      throw new Error(`${this.name}: the outcome was recorded without its finish being held`);
    });
    this.args = await Promise.race([hold.reached.promise, failed]);
    this.effectful = this.args.audit !== undefined;
    this.stage = 'answered';
    return this.args;
  }

  /** The held finish reaches Redis; returns its result once the recorder is about to retire the spool entry. */
  async finish(): Promise<FinishResult> {
    if (this.stage !== 'answered' || !this.#go || !this.#finished || !this.#retire)
      throw new Error(`${this.name} has no finish to run`);
    this.#go.resolve();
    this.result = await this.#finished;
    await this.#retire.reached.promise;
    this.stage = 'finished';
    return this.result;
  }

  /** The spool entry is retired and recordOutcome returns what BullMQ will be told. */
  async retire(): Promise<RecordedOutcome> {
    if (this.stage !== 'finished' || !this.#retire || !this.#record)
      throw new Error(`${this.name} has nothing to retire`);
    this.#retire.go.resolve();
    const recorded = await this.#record;
    this.#retire = undefined;
    this.stage = 'idle';
    return recorded;
  }

  /** The attempt ids still outstanding in this worker's spool file (read from disk). */
  get spoolPath(): string {
    return this.#spool.path;
  }

  /**
   * SIGKILL: whatever was in flight is gone, except the spool file, which is left for a replay under a
   * name the replay takes as abandoned (this pid, started before this process). The worker restarts.
   */
  async crash(abandonedDir: string): Promise<string | undefined> {
    const outstanding = this.#spool.outstanding;
    const path = this.#spool.path;
    // The held finish and retirement never go on: the process is dead.
    this.#store.hold = undefined;
    this.#retire = undefined;
    await this.#spool.close();
    let moved: string | undefined;
    if (outstanding > 0) moved = abandon(path, abandonedDir, this.shared.prefix);
    this.#grant = undefined;
    this.args = undefined;
    this.result = undefined;
    await this.#boot();
    return moved;
  }

  async close(): Promise<void> {
    await this.#spool.close();
  }
}

/** Moves a spool file to `dir` under a name abandonedSpools() takes: this host and pid, started at 0. */
export function abandon(path: string, dir: string, prefix: string): string {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const to = join(dir, `${prefix}.${hostTag()}.${process.pid}.0.${randomBytes(3).toString('hex')}.spool`);
  renameSync(path, to);
  return to;
}

/**
 * The real replay (Recorder.replay) of one abandoned spool file, by a new process. `dies`: the replayer
 * is killed after its finish calls and before it deletes the file, which is then replayed again later.
 */
export async function replayOne(
  shared: Shared,
  file: string,
  workDir: string,
  dies: boolean,
): Promise<{ files: number; entries: number; left: string | undefined }> {
  const text = readFileSync(file, 'utf8');
  const own = join(workDir, `replay-${randomBytes(3).toString('hex')}`);
  mkdirSync(own, { recursive: true, mode: 0o700 });
  const name = file.slice(file.lastIndexOf('/') + 1);
  renameSync(file, join(own, name));
  const recorder = new Recorder({
    store: new OutcomeStore(shared.redis, shared.keys),
    logger: shared.logger,
  });
  const r = await recorder.replay(own, shared.prefix);
  let left: string | undefined;
  if (dies) {
    const again = join(own, `again.spool`);
    writeFileSync(again, text, { mode: 0o600 });
    left = abandon(again, file.slice(0, file.lastIndexOf('/')), shared.prefix);
  }
  if (readdirSync(own).length !== 0) throw new Error(`the replay left ${readdirSync(own).join(', ')}`);
  return { ...r, left };
}
