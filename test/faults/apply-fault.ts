// Carries out one scheduled fault on the live run and notes what was at stake when it fell (calls in
// flight at the service, learners moved so far) and what it did (a write refused, clients killed, an exit
// code), so that a test can tell a fault that hit something from one that fell on an idle system.
import { setTimeout as sleep } from 'node:timers/promises';
import type { SimFaults } from '../../src/simulator/index.ts';
import { runCli, type CliResult } from '../helpers/cli.ts';
import type { Harness } from '../helpers/pipeline.ts';
import { newRedis } from '../helpers/redis.ts';
import type { OwnRedis } from '../helpers/redis-server.ts';
import type { RunPlan } from './draw-run.ts';
import type { FaultEvent } from './draw-schedule.ts';
import type { WorkerSlots } from './worker-slots.ts';
import { callsInFlight } from '../helpers/in-flight.ts';

/** What a run's faults act on. */
export interface Stage {
  run: RunPlan;
  h: Harness;
  redis: OwnRedis;
  slots: WorkerSlots;
  /** The simulator's faults outside any fault window (its usual latency). */
  base: SimFaults;
  /** Outputs of the CLI commands the schedule ran (pause, resume), for the token scan. */
  cli: CliResult[];
}

export interface Applied {
  event: FaultEvent;
  /** When it began, in ms after the first transfer call (later than drawn when its resource was busy). */
  startedAt: number;
  /** Transfer calls in flight at the service when it began. */
  inFlight: number;
  /** Learners the service had moved when it began. */
  moved: number;
  /** What it did, or why it did nothing. */
  notes: string[];
  /** A measurable effect: a write refused, clients killed, faulty answers given, an exit by the signal. */
  effective: boolean;
}

export function inFlight(stage: Stage): number {
  return callsInFlight(stage.h.sim);
}

export function moved(stage: Stage): number {
  return stage.h.sim.record.filter((r) => r.effectApplied).length;
}

/**
 * Waits for a moment with a call in flight, so that a kill or a freeze hits one: the time moves, what is
 * drawn does not. The service holds its answers from then until the returned release is called (once
 * the signal is delivered), so the calls seen in flight are still in flight when it falls, however
 * slow the machine. Gives up only when every learner has moved or after `ms` (a Redis that refuses
 * writes holds new calls back for as long as it refuses, and the gate takes a moment to open after).
 */
async function aim(stage: Stage, a: Applied, ms: number): Promise<() => void> {
  const from = Date.now();
  const release = stage.h.sim.holdAnswers();
  const movable = stage.run.movable.length;
  while (inFlight(stage) === 0 && moved(stage) < movable && Date.now() - from < ms) await sleep(5);
  a.inFlight = inFlight(stage);
  if (Date.now() - from > 5) a.notes.push(`aimed ${Date.now() - from} ms for a call in flight`);
  return release;
}

async function worker(stage: Stage, e: FaultEvent, a: Applied): Promise<void> {
  const slot = e.slot ?? 0;
  if (!stage.slots.running(slot)) {
    a.notes.push(`worker ${slot + 1} was not running`);
    return;
  }
  const release = await aim(stage, a, stage.run.requestTimeoutMs + 10_000);
  if (e.kind === 'worker-stop') {
    await stage.slots.signal(slot, 'SIGSTOP');
    release();
    a.effective = true;
    await sleep(e.ms);
    await stage.slots.signal(slot, 'SIGCONT');
    return;
  }
  const signal = e.kind === 'worker-kill' ? 'SIGKILL' : 'SIGTERM';
  // The signal is sent before signal() returns its promise: the answers go on from there (a SIGTERM
  // waits for the calls in flight to end).
  const exiting = stage.slots.signal(slot, signal, stage.run.requestTimeoutMs + 15_000);
  release();
  const exit = await exiting;
  a.effective = exit?.signal === 'SIGKILL' || (signal === 'SIGTERM' && exit !== undefined);
  a.notes.push(`exit code ${exit?.code} signal ${exit?.signal}`);
  await sleep(e.ms);
  stage.slots.start(slot);
}

/** The used memory as the limit: every write that needs memory is refused (noeviction). */
async function fillRedis(stage: Stage, e: FaultEvent, a: Applied): Promise<void> {
  const admin = newRedis(stage.redis.url);
  try {
    const used = Number(/used_memory:(\d+)/.exec(await admin.info('memory'))?.[1] ?? 0);
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
    await admin.config('SET', 'maxmemory', String(Math.floor(used * 0.9)));
    const refused = await admin.set('lt-faults-probe', 'x').then(
      () => 'accepted',
      (err: Error) => err.message,
    );
    a.effective = /OOM/.test(refused);
    a.notes.push(`probe write: ${refused.slice(0, 80)}`);
    await sleep(e.ms);
    await admin.config('SET', 'maxmemory', '0');
    await admin.del('lt-faults-probe');
  } finally {
    admin.disconnect();
  }
}

async function redis(stage: Stage, e: FaultEvent, a: Applied): Promise<void> {
  switch (e.kind) {
    case 'redis-crash': {
      await stage.redis.crash();
      a.effective = true;
      await sleep(e.ms);
      await stage.redis.start();
      const admin = newRedis(stage.redis.url);
      a.notes.push(`${await admin.dbsize()} keys after the restart`);
      admin.disconnect();
      return;
    }
    case 'redis-freeze':
      stage.redis.freeze(true);
      a.effective = true;
      await sleep(e.ms);
      stage.redis.freeze(false);
      return;
    case 'redis-full':
      return fillRedis(stage, e, a);
    default: {
      const admin = newRedis(stage.redis.url);
      try {
        if (e.kind === 'redis-pause') {
          a.effective = (await admin.call('CLIENT', 'PAUSE', String(e.ms), 'ALL')) === 'OK';
          await sleep(e.ms);
        } else {
          const killed = Number(await admin.call('CLIENT', 'KILL', 'TYPE', 'normal'));
          a.effective = killed > 0;
          a.notes.push(`${killed} clients killed`);
        }
      } finally {
        admin.disconnect();
      }
    }
  }
}

async function service(stage: Stage, e: FaultEvent, a: Applied): Promise<void> {
  const { sim } = stage.h;
  const from = Date.now();
  sim.setFaults(e.kind === 'service-down' ? { ...stage.base, down: true } : { ...stage.base, ...e.faults });
  await sleep(e.ms);
  sim.setFaults(stage.base);
  const slow = e.faults?.latencyBeforeMs ?? e.faults?.latencyAfterMs;
  const calls = sim.record.filter((r) => r.method === 'PATCH' && r.receivedAt >= from);
  const hit = calls.filter(
    (r) =>
      r.fault !== undefined ||
      r.result === 'down' ||
      (slow !== undefined && (r.respondedAt ?? Date.now()) - r.receivedAt >= slow[0]),
  ).length;
  // In place for its time; whether calls came meanwhile (another fault may hold them) and how many the
  // fault shaped (the seeded dice) is told, not required.
  a.effective = true;
  a.notes.push(`${calls.length} calls while it lasted, ${hit} of them shaped by it`);
}

/** `pause --org acme`, then `resume`; a resume that fails is tried again (the drain needs it resumed). */
async function orgPause(stage: Stage, e: FaultEvent, a: Applied): Promise<void> {
  const cli = async (cmd: 'pause' | 'resume') => {
    const r = await runCli([cmd, '--org', 'acme'], stage.h.env, 30_000);
    stage.cli.push(r);
    const why = r.code === 0 ? '' : `: ${r.stderr.trim().split('\n').slice(-1)[0]?.slice(0, 200)}`;
    a.notes.push(`${cmd} exit ${r.code}${why}`);
    return r.code === 0;
  };
  a.effective = await cli('pause');
  await sleep(e.ms);
  for (let i = 0; i < 3 && !(await cli('resume')); i++) await sleep(1000);
}

export async function applyFault(stage: Stage, e: FaultEvent, t0: number): Promise<Applied> {
  const a: Applied = {
    event: e,
    startedAt: Date.now() - t0,
    inFlight: inFlight(stage),
    moved: moved(stage),
    notes: [],
    effective: false,
  };
  try {
    if (e.kind.startsWith('worker-')) await worker(stage, e, a);
    else if (e.kind.startsWith('redis-')) await redis(stage, e, a);
    else if (e.kind.startsWith('service-')) await service(stage, e, a);
    else await orgPause(stage, e, a);
  } catch (err) {
    a.notes.push(`failed: ${(err as Error).message.split('\n')[0]}`);
  }
  return a;
}
