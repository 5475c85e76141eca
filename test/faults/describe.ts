// What a failing seed prints so that a person can see what it did and replay it: the drawn run, the
// schedule one event a line with its time, and the exact command that runs the seed again.
import { formatRate } from '../../src/core/duration.ts';
import type { RunPlan } from './draw-run.ts';
import type { FaultEvent } from './draw-schedule.ts';
import type { Applied } from './apply-fault.ts';
import type { SeedReport } from './run-seed.ts';

export function replayCommand(seed: number): string {
  return `npm run faults -- --seeds ${seed}`;
}

const list = (ids: readonly number[]): string => (ids.length === 0 ? 'none' : ids.join(' '));
const seconds = (ms: number): string => `${(ms / 1000).toFixed(2)} s`;

export function describeRun(run: RunPlan): string[] {
  return [
    `run of seed ${run.seed}:`,
    `  learners   ${run.ids.length} enqueued for acme: ${run.movable.length} to move, ` +
      `${run.alreadyIn.length} in acme already (${list(run.alreadyIn)}), ${run.missing.length} unknown (${list(run.missing)})`,
    `  refused    403 for ${list(run.forbidden)}; always 500 for ${list(run.failing)}`,
    `  tokens     ${run.tokens.length} for acme; limits ${formatRate(run.perToken)} per token, ` +
      `${formatRate(run.perOrg)} per org, burst ${run.burst}, service window ${run.window}; repeats answer ${run.repeatMode}`,
    `  workers    ${run.slots} process(es), concurrency ${run.concurrency} each, own spool dir per slot; ` +
      `REQUEST_TIMEOUT ${run.requestTimeoutMs}ms; service latency ${run.latencyMs[0]}-${run.latencyMs[1]} ms`,
  ];
}

/** One line for an event: its time, then what happens (times after the run's first transfer call). */
export function describeEvent(e: FaultEvent): string {
  const end = seconds(e.at + e.ms);
  const slot = `worker ${(e.slot ?? 0) + 1}`;
  const what = ((): string => {
    switch (e.kind) {
      case 'worker-kill':
        return `${slot}: SIGKILL, started again ${e.ms} ms after it exits (same spool dir)`;
      case 'worker-term':
        return `${slot}: SIGTERM, started again ${e.ms} ms after it exits (same spool dir)`;
      case 'worker-stop':
        return `${slot}: SIGSTOP, SIGCONT at ${end}`;
      case 'redis-pause':
        return `Redis: CLIENT PAUSE ${e.ms} ALL`;
      case 'redis-freeze':
        return `Redis: SIGSTOP of redis-server, SIGCONT at ${end}`;
      case 'redis-crash':
        return `Redis: SIGKILL of redis-server, started again (AOF) ${e.ms} ms later`;
      case 'redis-full':
        return `Redis: maxmemory set to its used memory (noeviction) until ${end}`;
      case 'redis-kill-clients':
        return 'Redis: CLIENT KILL TYPE normal';
      case 'service-faults':
      case 'service-slow':
        return `service: ${JSON.stringify(e.faults)} until ${end}`;
      case 'service-down':
        return `service: down (every connection cut) until ${end}`;
      case 'org-pause':
        return `acme: learner-transfer pause, resume at ${end}`;
    }
  })();
  return `${seconds(e.at).padStart(8)}  ${what}`;
}

export function describeSchedule(events: readonly FaultEvent[]): string[] {
  return ['schedule (after the first transfer call):', ...events.map(describeEvent)];
}

/** What each event found and did when it fell (its resource may have made it wait past its time). */
export function describeApplied(applied: readonly Applied[]): string[] {
  return [
    'what the events met:',
    ...applied.map(
      (a) =>
        `${seconds(a.startedAt).padStart(8)}  ${a.event.kind}${a.event.slot === undefined ? '' : ` ${a.event.slot + 1}`}: ` +
        `${a.inFlight} calls in flight, ${a.moved} learners moved; ${a.effective ? 'took effect' : 'NO EFFECT'}` +
        (a.notes.length > 0 ? `; ${a.notes.join('; ')}` : ''),
    ),
  ];
}

/** The full account of a seed: what a failing one prints. */
export function describeReport(r: SeedReport): string[] {
  const verdict = r.violations.length === 0 ? 'passed' : `FAILED with ${r.violations.length} violation(s)`;
  return [
    `seed ${r.seed} ${verdict} in ${(r.durationMs / 1000).toFixed(1)} s (${JSON.stringify(r.phases)})`,
    ...describeRun(r.run),
    ...describeSchedule(r.schedule),
    ...describeApplied(r.applied),
    ...(r.violations.length > 0 ? ['violations:', ...r.violations.map((v) => `  - ${v}`)] : []),
    ...(r.notes.length > 0 ? ['notes:', ...r.notes.map((n) => `  - ${n}`)] : []),
    `replay: ${replayCommand(r.seed)}`,
  ];
}
