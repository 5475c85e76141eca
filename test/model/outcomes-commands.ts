// The commands fast-check draws for the outcome store model: each runs one thing of the real system (a worker's
// ask, answer, finish or spool retirement; a kill; a replay; the repair sweep) and checks it against the
// model at once.
import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import { expect } from 'vitest';
import type { TransferOutcome } from '../../src/api/outcome.ts';
import type { Acquired, Refused } from '../../src/limiter/index.ts';
import { repairOrg } from '../../src/ops/actions/repair.ts';
import { isSuccessBucket, type Bucket } from '../../src/outcomes/record.ts';
import type { FinishArgs } from '../../src/outcomes/store.ts';
import { readSpool } from '../../src/worker/spool.ts';
import type { LeaseVerdict } from './outcomes-model.ts';
import { replayOne, type ModelWorker } from './outcomes-system.ts';
import {
  ANSWERS,
  MAX_ATTEMPTS,
  RUN,
  meet,
  type Abandoned,
  type AnswerKind,
  type World,
} from './outcomes-world.ts';

type Cmd = fc.AsyncCommand<World, World, false>;

function expectVerdict(r: Acquired | Refused, v: LeaseVerdict, what: string): void {
  if (v.ok) expect(r.ok && { tookOver: r.tookOver }, what).toEqual({ tookOver: v.tookOver });
  else
    expect(!r.ok && { scope: r.scope, waitMs: r.waitMs }, what).toEqual({ scope: 'lease', waitMs: v.waitMs });
}

class AcquireCmd implements Cmd {
  constructor(
    readonly w: number,
    readonly learner: number,
    readonly patient: boolean,
  ) {}
  check(s: World) {
    return s.workers[this.w]?.stage === 'idle';
  }
  async run(_m: World, s: World) {
    const worker = s.workers[this.w] as ModelWorker;
    const id = s.learners[this.learner % s.learners.length] as number;
    let holder: string | undefined;
    // A patient worker waits out the lease as the refusal says (deadline, then grace), up to a takeover.
    for (let tries = 0; ; tries++) {
      const r = await worker.acquire(id, holder);
      holder = worker.holder;
      const v = s.model.acquire(id, holder, r.now);
      s.log.push(
        `${worker.name} acquire ${id} as ${holder} at ${r.now}: ${r.ok ? `granted${r.tookOver ? ' (took over)' : ''}` : `refused ${r.scope} ${r.waitMs}`}`,
      );
      expectVerdict(r, v, `${this} try ${tries}`);
      meet(
        r.ok
          ? r.tookOver
            ? 'lease taken over'
            : 'lease granted'
          : v.ok
            ? 'lease refused'
            : v.mark !== undefined
              ? 'lease contested'
              : 'lease refused',
      );
      if (r.ok || !this.patient || tries >= 3) break;
      await sleep(r.waitMs + 1);
    }
    if (worker.stage !== 'holding') return;
    // admission.ts: under its lease the learner's record is current; one found done gets no call.
    const rec = await s.env.store.get(s.org, id);
    if (rec && isSuccessBucket(rec.b as Bucket)) {
      await worker.giveBack();
      s.model.finish({ org: s.org, learnerId: id, runId: RUN, at: 0, attemptId: 'give-back', holder });
      s.log.push(`${worker.name} found ${id} done: gave back`);
      meet('found done under the lease: gave back');
    }
  }
  toString() {
    return `acquire(W${this.w}, learner#${this.learner}${this.patient ? ', patient' : ''})`;
  }
}

class AnswerCmd implements Cmd {
  constructor(
    readonly w: number,
    readonly kind: AnswerKind,
    readonly attemptsMade: number,
  ) {}
  check(s: World) {
    return s.workers[this.w]?.stage === 'holding';
  }
  async run(_m: World, s: World) {
    const worker = s.workers[this.w] as ModelWorker;
    // A call is bounded by its lease's deadline (transfer-call.ts), and a takeover comes after that
    // deadline: a worker whose lease was taken over had its call time out before the other's call, so
    // the service cannot answer it now, after what the other may have done.
    const outcome: TransferOutcome = s.model.overtaken.has(worker.holder)
      ? {
          code: 'network-error',
          errorCode: 'ABORT_ERR',
          message: 'timed out',
          maybeDelivered: true,
          durationMs: 12,
        }
      : s.answer(worker.learnerId, this.kind);
    const args = await worker.answer(outcome, this.attemptsMade, MAX_ATTEMPTS);
    s.log.push(
      `${worker.name} answered ${outcome.code} for ${worker.learnerId}: ${args.attemptId} ${JSON.stringify(args.update)}`,
    );
    meet(`answered ${outcome.code}${'status' in outcome ? ` ${outcome.status}` : ''}`);
    if (s.model.overtaken.has(worker.holder)) meet('answered after its lease was taken over');
    // An answer that may have changed something is on disk before anything reaches Redis.
    const spooled = (await readSpool(worker.spoolPath)).map((e) => e.args.attemptId);
    expect(spooled, `${worker.name}'s spool`).toEqual(worker.effectful ? [args.attemptId] : []);
  }
  toString() {
    return `answer(W${this.w}, ${this.kind}, attemptsMade ${this.attemptsMade})`;
  }
}

class FinishCmd implements Cmd {
  constructor(readonly w: number) {}
  check(s: World) {
    return s.workers[this.w]?.stage === 'answered';
  }
  async run(_m: World, s: World) {
    const worker = s.workers[this.w] as ModelWorker;
    const args = worker.args as FinishArgs;
    const r = await worker.finish();
    const want = s.model.finish(args);
    s.log.push(`${worker.name} finished ${args.attemptId}: ${JSON.stringify(r)}`);
    expect({ bucket: r.bucket, replayed: r.replayed, pr: r.possibleRepeat }, `${this}`).toEqual({
      bucket: want.bucket,
      replayed: want.replayed,
      pr: want.possibleRepeat,
    });
    if (r.possibleRepeat) meet('finished as a possible repeat');
    if (args.update && want.bucket !== args.update.b)
      meet(
        isSuccessBucket(args.update.b)
          ? "'transferred' kept over a repeat"
          : 'a success kept over a later failure',
      );
    await s.expectRecord(args.learnerId);
  }
  toString() {
    return `finish(W${this.w})`;
  }
}

class RetireCmd implements Cmd {
  constructor(readonly w: number) {}
  check(s: World) {
    return s.workers[this.w]?.stage === 'finished';
  }
  async run(_m: World, s: World) {
    const worker = s.workers[this.w] as ModelWorker;
    const args = worker.args as FinishArgs;
    const recorded = await worker.retire();
    // What BullMQ is told: the decision, except that a success on record is never turned into a failure.
    const decided = args.update?.b as Bucket;
    const onRecord = worker.result?.bucket as Bucket;
    const want = isSuccessBucket(onRecord) && !isSuccessBucket(decided) ? onRecord : decided;
    expect(recorded.bucket, `${this}`).toBe(want);
    expect(await readSpool(worker.spoolPath), `${worker.name}'s spool after retiring`).toEqual([]);
  }
  toString() {
    return `retire(W${this.w})`;
  }
}

class CrashCmd implements Cmd {
  constructor(
    readonly w: number,
    /** Killed mid-call (holding): the request had reached the service, which moved the learner. */
    readonly landed: boolean,
  ) {}
  check(s: World) {
    return s.workers[this.w]?.stage !== 'idle';
  }
  async run(_m: World, s: World) {
    const worker = s.workers[this.w] as ModelWorker;
    const args = worker.args;
    const outstanding = worker.effectful && (worker.stage === 'answered' || worker.stage === 'finished');
    const midCall = worker.stage === 'holding' && this.landed;
    s.log.push(`${worker.name} crashed at ${worker.stage}${midCall ? ' (its call had landed)' : ''}`);
    meet(
      midCall
        ? 'killed mid-call after it landed'
        : `killed ${worker.stage}${outstanding ? ' with its answer spooled' : ''}`,
    );
    if (midCall) s.effect(worker.learnerId, s.model.inOrg.has(worker.learnerId), false);
    const file = await worker.crash(s.abandonedDir);
    if (outstanding && args) {
      expect(file, `${worker.name}'s spool left for a replay`).toBeDefined();
      if (!file) return;
      expect((await readSpool(file)).map((e) => e.args.attemptId)).toEqual([args.attemptId]);
      s.abandoned.push({ file, args: [args] });
    } else expect(file, `${worker.name} had nothing outstanding`).toBeUndefined();
  }
  toString() {
    return `crash(W${this.w}${this.landed ? ', its call landed' : ''})`;
  }
}

class ReplayCmd implements Cmd {
  constructor(
    readonly pick: number,
    readonly dies: boolean,
  ) {}
  check(s: World) {
    return s.abandoned.length > 0;
  }
  async run(_m: World, s: World) {
    const i = this.pick % s.abandoned.length;
    const item = s.abandoned[i] as Abandoned;
    s.abandoned.splice(i, 1);
    const merged = item.args.every((a) => s.model.records.get(a.learnerId)?.merged.includes(a.attemptId));
    const before = merged ? await s.snapshot() : undefined;
    const r = await replayOne(s.env.shared, item.file, s.dir, this.dies);
    meet(merged ? 'replayed what was merged' : 'replayed what was not merged');
    if (this.dies) meet('the replayer died before deleting the file');
    s.log.push(
      `replayed ${item.args.map((a) => a.attemptId).join(', ')}${this.dies ? ' (replayer died)' : ''}`,
    );
    expect({ files: r.files, entries: r.entries }, `${this}`).toEqual({
      files: 1,
      entries: item.args.length,
    });
    for (const a of item.args) {
      const want = s.model.finish(a);
      expect(want.replayed, `model: ${a.attemptId} replayed`).toBe(merged);
      await s.expectRecord(a.learnerId);
    }
    // A replay of what is merged already adds nothing: not a byte of the outcome store changes.
    if (before)
      expect(await s.snapshot(), 'the outcome store after a replay of merged attempts').toEqual(before);
    if (r.left) s.abandoned.push({ file: r.left, args: item.args });
  }
  toString() {
    return `replay(#${this.pick}${this.dies ? ', replayer dies before deleting the file' : ''})`;
  }
}

class RepairCmd implements Cmd {
  check() {
    return true;
  }
  async run(_m: World, s: World) {
    const m = s.model;
    const stranded = s.learners.filter((id) => {
      const r = m.records.get(id);
      return r && (r.bucket === 'queued' || r.bucket === 'retrying') && !m.jobs.has(id);
    });
    const orphans = s.learners.filter((id) => m.jobs.has(id) && !m.records.has(id));
    const { store, queues, redis, keys } = s.env;
    const report = await repairOrg({ store, queues, redis, keys }, s.org);
    s.log.push(`repair: ${JSON.stringify(report)}`);
    if (report.readded > 0) meet('repair re-added a job');
    if (report.recorded > 0) meet('repair recorded a job without a record');
    expect(
      {
        stranded: report.stranded,
        readded: report.readded,
        orphanJobs: report.orphanJobs,
        recorded: report.recorded,
      },
      `${this}`,
    ).toEqual({
      stranded: stranded.length,
      readded: stranded.length,
      orphanJobs: orphans.length,
      recorded: orphans.length,
    });
    for (const id of stranded) m.jobs.add(id);
    for (const id of orphans) m.queued(id, RUN);
    for (const id of s.learners) await s.expectRecord(id);
  }
  toString() {
    return 'repair()';
  }
}

/**
 * A worker's next step, whatever it is: ask for a learner (idle), get the service's answer (holding),
 * finish (answered), retire the spool entry and ask for the next learner (finished). Always applicable,
 * so every drawn command moves something. A step that is not `slow` records its answer at once (answer,
 * finish, retire): most attempts are quick, and the slow ones leave room for the other worker, a crash,
 * a replay or the sweep between the answer, its finish and the spool's retirement.
 */
class StepCmd implements Cmd {
  constructor(
    readonly w: number,
    readonly learner: number,
    readonly patient: boolean,
    readonly kind: AnswerKind,
    readonly attemptsMade: number,
    readonly slow: boolean,
  ) {}
  check() {
    return true;
  }
  async run(m: World, s: World) {
    const stage = () => s.workers[this.w]?.stage;
    if (stage() === 'holding') {
      await new AnswerCmd(this.w, this.kind, this.attemptsMade).run(m, s);
      if (this.slow) return;
    }
    if (stage() === 'answered') {
      await new FinishCmd(this.w).run(m, s);
      if (this.slow) return;
    }
    if (stage() === 'finished') await new RetireCmd(this.w).run(m, s);
    else if (stage() === 'idle') await new AcquireCmd(this.w, this.learner, this.patient).run(m, s);
  }
  /** Its choices for every stage: what it did is in the failure's step-by-step log. */
  toString() {
    return `step(W${this.w}, learner#${this.learner}${this.patient ? ' patiently' : ''}, ${this.kind}, attemptsMade ${this.attemptsMade}${this.slow ? ', slow' : ''})`;
  }
}

const worker = fc.integer({ min: 0, max: 1 });
const step = fc
  .tuple(worker, fc.nat(2), fc.boolean(), fc.constantFrom(...ANSWERS), fc.nat(MAX_ATTEMPTS - 1), fc.boolean())
  .map(([w, l, p, k, a, slow]) => new StepCmd(w, l, p, k, a, slow));
export const commands = [
  step,
  step,
  step,
  step,
  step,
  fc.tuple(worker, fc.boolean()).map(([w, l]) => new CrashCmd(w, l)),
  fc.tuple(worker, fc.boolean()).map(([w, l]) => new CrashCmd(w, l)),
  fc.tuple(fc.nat(3), fc.boolean()).map(([p, d]) => new ReplayCmd(p, d)),
  fc.tuple(fc.nat(3), fc.boolean()).map(([p, d]) => new ReplayCmd(p, d)),
  fc.constant(new RepairCmd()),
];

/** Every live attempt finishes and every abandoned spool is replayed: nothing is left in flight. */
export async function drain(s: World): Promise<void> {
  for (const [i, w] of s.workers.entries()) {
    if (w.stage === 'answered') await new FinishCmd(i).run(s, s);
    if (w.stage === 'finished') await new RetireCmd(i).run(s, s);
  }
  while (s.abandoned.length > 0) await new ReplayCmd(0, false).run(s, s);
}
