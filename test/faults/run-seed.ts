// One seed, start to end: draw the run and its schedule, start a redis-server of the seed's own (AOF,
// fsync always: a crash loses no acknowledged write), the simulator with the same limits as the workers,
// the worker slots; wait for the first transfer call, play the schedule, drain, judge. Everything it
// started is killed and every directory removed, on success, failure and timeout alike.
import { rmSync } from 'node:fs';
import { nothingAtStake } from './at-stake.ts';
import { formatRate } from '../../src/core/duration.ts';
import type { SimFaults } from '../../src/simulator/index.ts';
import { startHarness, type Harness } from '../helpers/pipeline.ts';
import { startOwnRedis, type OwnRedis } from '../helpers/redis-server.ts';
import type { Applied, Stage } from './apply-fault.ts';
import { drain } from './drain.ts';
import { drawRun, SIM_LEARNERS, type RunPlan } from './draw-run.ts';
import { drawSchedule, type FaultEvent } from './draw-schedule.ts';
import { executeSchedule, firstCall } from './execute.ts';
import { judge, type Verdict } from './judge.ts';
import { WorkerSlots } from './worker-slots.ts';

export interface SeedReport {
  seed: number;
  run: RunPlan;
  schedule: FaultEvent[];
  applied: Applied[];
  violations: string[];
  notes: string[];
  /** Seconds spent per phase: setup, schedule, drain, judge. */
  phases: Record<string, number>;
  durationMs: number;
  verdict?: Verdict;
  replayed: number;
  calls: number;
}

function harnessFor(run: RunPlan, redisUrl: string, base: SimFaults): Promise<Harness> {
  return startHarness({
    tag: `faults-${run.seed}`,
    redisUrl,
    sim: {
      seed: run.seed,
      learners: SIM_LEARNERS,
      repeatMode: run.repeatMode,
      tokens: run.tokens.map((token) => ({ token, org: 'acme' })),
      forbiddenLearnerIds: run.forbidden,
      failingLearnerIds: run.failing,
      limits: { perToken: run.perToken, perOrg: run.perOrg, window: run.window },
      faults: base,
    },
    env: {
      LEARNER_API_TOKENS: run.tokens.map((t) => `acme:${t}`).join(','),
      LIMIT_PER_TOKEN: formatRate(run.perToken),
      LIMIT_PER_ORG: formatRate(run.perOrg),
      LIMIT_BURST: run.burst,
      REQUEST_TIMEOUT: `${run.requestTimeoutMs}ms`,
      CONNECT_TIMEOUT: '500ms',
      BACKOFF: '50ms',
      // An error window of up to ~45% failing answers, 9 attempts: about 1 in 1300 learners whose every
      // attempt falls in it would fail by chance (noted, not a violation: it fails with a stated reason).
      ATTEMPTS: '9',
      LEASE_GRACE: '1s',
      CONCURRENCY: String(run.concurrency),
      LOG_LEVEL: 'info',
    },
  });
}

/** Kills and removes everything a seed started; never throws, never waits long on a wedged piece. */
async function cleanup(stage: Partial<Stage>, redis: OwnRedis | undefined): Promise<void> {
  stage.slots?.killAll();
  if (redis) {
    redis.freeze(false);
    if (stage.h && !redis.running) await redis.start().catch(() => {});
  }
  if (stage.h) {
    const h = stage.h;
    await Promise.race([h.close().catch(() => {}), new Promise((r) => setTimeout(r, 10_000).unref())]);
    rmSync(h.dir, { recursive: true, force: true });
  }
  await redis?.close().catch(() => {});
}

async function play(report: SeedReport, stage: Partial<Stage>, phase: (p: string) => void) {
  const { run, schedule } = report;
  stage.redis = await startOwnRedis(['--appendfsync', 'always', '--maxmemory-policy', 'noeviction']);
  stage.base = { latencyAfterMs: run.latencyMs };
  stage.h = await harnessFor(run, stage.redis.url, stage.base);
  stage.cli = [];
  await stage.h.enqueueIds(run.ids);
  stage.slots = new WorkerSlots(stage.h.env, stage.h.dir, run.slots, run.concurrency);
  for (let slot = 0; slot < run.slots; slot++) stage.slots.start(slot);
  const full = stage as Stage;
  const t0 = await firstCall(full, 45_000);
  phase('setup');
  report.applied = await executeSchedule(full, schedule, t0);
  phase('schedule');
  const drained = await drain(full, report.applied, 90_000);
  report.violations.push(...drained.violations);
  report.notes.push(...full.slots.notes, ...drained.notes);
  report.replayed = drained.replayed;
  phase('drain');
  const verdict = await judge(full, report.applied, full.slots.outputs());
  report.verdict = verdict;
  report.violations.push(...verdict.violations);
  report.notes.push(...verdict.notes);
  report.calls = full.h.sim.record.filter((r) => r.method === 'PATCH').length;
  // A fault that met nothing says why only in the workers' words: what they logged from the first call.
  if (nothingAtStake(report).length > 0) report.notes.push(...workerLines(full.slots.outputs(), t0));
  phase('judge');
}

/** Each process's log lines (info and up) from `t0` on, with their time from it: the last 60 of each. */
function workerLines(outputs: string[], t0: number): string[] {
  return outputs.flatMap((text, i) => {
    const lines = text.split('\n').flatMap((line) => {
      try {
        const { time = 0, level = 0 } = JSON.parse(line) as { time?: number; level?: number };
        return level >= 30 && time >= t0
          ? [`${((time - t0) / 1000).toFixed(2)} s ${line.slice(0, 300)}`]
          : [];
      } catch {
        return [];
      }
    });
    if (lines.length === 0) return [];
    return [`output ${i + 1}, its last lines from the first call on:\n${lines.slice(-60).join('\n')}`];
  });
}

/**
 * Runs one seed; a seed that takes longer than `timeoutMs`, or is aborted (Ctrl-C), fails with the phase
 * it was in, after everything it started is gone.
 */
export async function runSeed(
  seed: number,
  { timeoutMs = 150_000, signal, burst }: { timeoutMs?: number; signal?: AbortSignal; burst?: string } = {},
): Promise<SeedReport> {
  // `burst` overrides the seed's own draw (LIMIT_BURST), every other draw unchanged.
  const run = { ...drawRun(seed), ...(burst ? { burst } : {}) };
  const started = Date.now();
  const report: SeedReport = {
    seed,
    run,
    schedule: drawSchedule(run),
    applied: [],
    violations: [],
    notes: [],
    phases: {},
    durationMs: 0,
    replayed: 0,
    calls: 0,
  };
  let mark = started;
  let current = 'setup';
  const phase = (name: string) => {
    report.phases[name] = (Date.now() - mark) / 1000;
    mark = Date.now();
    current = { setup: 'schedule', schedule: 'drain', drain: 'judge' }[name] ?? 'end';
  };
  const stage: Partial<Stage> = { run };
  let timer: NodeJS.Timeout | undefined;
  let onAbort = () => {};
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs / 1000} s`)), timeoutMs);
    onAbort = () => reject(new Error('aborted'));
    signal?.addEventListener('abort', onAbort, { once: true });
  });
  try {
    await Promise.race([play(report, stage, phase), timeout]);
  } catch (err) {
    report.violations.push(`the seed did not finish (in its ${current}): ${(err as Error).message}`);
    // What the workers said last: why they did not get on (before they are killed below).
    for (const [i, text] of (stage.slots?.outputs() ?? []).entries())
      if (text.trim())
        report.notes.push(
          `worker output ${i + 1}, last lines:\n${text.trim().split('\n').slice(-8).join('\n')}`,
        );
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
    await cleanup(stage, stage.redis);
    report.durationMs = Date.now() - started;
  }
  return report;
}
