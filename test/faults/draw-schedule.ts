// The faults a seed throws at its run, drawn from the seed: what happens, to which worker slot, when
// (milliseconds after the first transfer call reaches the service) and for how long. Two events never
// share one resource at once (a slot, the Redis, the service, the organization's pause); different
// resources overlap freely. Only the draw is deterministic: how the events interleave with the work is
// up to timing, and the invariants must hold whatever it is.
import type { SimFaults } from '../../src/simulator/index.ts';
import { stream, type Random } from '../../src/simulator/random.ts';
import type { RunPlan } from './draw-run.ts';

export const FAULT_KINDS = [
  'worker-kill',
  'worker-term',
  'worker-stop',
  'redis-pause',
  'redis-freeze',
  'redis-crash',
  'redis-full',
  'redis-kill-clients',
  'service-faults',
  'service-slow',
  'service-down',
  'org-pause',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export interface FaultEvent {
  /** Milliseconds after the run's first transfer call. */
  at: number;
  kind: FaultKind;
  /** Worker slot (0-based) of a worker-* event. */
  slot?: number;
  /**
   * worker-kill/-term: the delay before the slot is started again; worker-stop: the time between SIGSTOP
   * and SIGCONT; redis-crash: the time the server stays down; every other timed fault: how long it lasts.
   */
  ms: number;
  /** service-faults / service-slow: what the simulator does meanwhile (added to its usual latency). */
  faults?: SimFaults;
}

const WORKER_KINDS: readonly FaultKind[] = [
  'worker-kill',
  'worker-kill',
  'worker-term',
  'worker-stop',
  'worker-stop',
];
const OTHER_KINDS: readonly FaultKind[] = FAULT_KINDS.filter((k) => !k.startsWith('worker-'));
/** The window the events are drawn in, and the latest any may start after being moved off a busy one. */
const WINDOW_MS = 9_000;
const LATEST_MS = 11_000;
/** A started `work` process takes about this long before it takes jobs (tsx, Redis, spool replay). */
const BOOT_MS = 3000;

const between = (random: Random, min: number, max: number, step = 10): number =>
  Math.round(random.int(min, max) / step) * step;

function drawFaults(random: Random, kind: FaultKind, run: RunPlan): SimFaults | undefined {
  if (kind === 'service-faults') {
    return {
      errorRate: between(random, 5, 30, 1) / 100,
      resetRate: between(random, 0, 8, 1) / 100,
      truncateRate: between(random, 0, 8, 1) / 100,
    };
  }
  if (kind !== 'service-slow') return undefined;
  // Up to a bit beyond the request timeout: calls that time out while the service still works on them.
  const hi = between(random, Math.round(run.requestTimeoutMs * 0.3), Math.round(run.requestTimeoutMs * 1.2));
  const range: [number, number] = [Math.round(hi / 3), hi];
  return random.chance(0.5) ? { latencyBeforeMs: range } : { latencyAfterMs: range };
}

function drawMs(random: Random, kind: FaultKind): number {
  switch (kind) {
    case 'worker-kill':
    case 'worker-term':
      return between(random, 300, 2000);
    case 'worker-stop':
      return between(random, 1000, 9000);
    case 'redis-crash':
      return between(random, 200, 2500);
    case 'redis-kill-clients':
      return 0;
    case 'redis-full':
      return between(random, 1000, 5000);
    case 'service-faults':
      return between(random, 2000, 8000);
    case 'service-slow':
      return between(random, 2000, 6000);
    case 'service-down':
      return between(random, 500, 3000);
    default:
      return between(random, 500, 4000);
  }
}

/** The resource an event holds, and for how long (a restarted worker holds its slot while it boots). */
function holds(e: FaultEvent, run: RunPlan): { resource: string; busyMs: number } {
  if (e.kind.startsWith('worker-')) {
    const stopping = e.kind === 'worker-term' ? run.requestTimeoutMs + 1000 : 0;
    const booting = e.kind === 'worker-stop' ? 500 : BOOT_MS;
    return { resource: `slot ${e.slot}`, busyMs: stopping + e.ms + booting };
  }
  const resource = e.kind.startsWith('redis-') ? 'redis' : e.kind.startsWith('service-') ? 'service' : 'org';
  return { resource, busyMs: e.ms + 500 };
}

/** Moves `e` past every busy interval of its resource; false when that pushes it past LATEST_MS. */
function place(e: FaultEvent, run: RunPlan, busy: Map<string, [number, number][]>): boolean {
  const { resource, busyMs } = holds(e, run);
  const taken = busy.get(resource) ?? [];
  for (const [from, to] of [...taken].sort((a, b) => a[0] - b[0])) {
    if (e.at < to && e.at + busyMs > from) e.at = to;
  }
  if (e.at > LATEST_MS) return false;
  busy.set(resource, [...taken, [e.at, e.at + busyMs]]);
  return true;
}

/** 3-6 events; the first hits a worker and the second something else, so every seed has both at stake. */
export function drawSchedule(run: RunPlan): FaultEvent[] {
  const random = stream(run.seed, 'faults:schedule');
  const count = random.int(3, 6);
  const busy = new Map<string, [number, number][]>();
  const events: FaultEvent[] = [];
  for (let i = 0; i < count; i++) {
    const kind = random.pick(i === 0 ? WORKER_KINDS : i === 1 ? OTHER_KINDS : FAULT_KINDS);
    const e: FaultEvent = { at: between(random, 0, WINDOW_MS), kind, ms: drawMs(random, kind) };
    if (kind.startsWith('worker-')) e.slot = random.int(0, run.slots - 1);
    const faults = drawFaults(random, kind, run);
    if (faults) e.faults = faults;
    if (place(e, run, busy)) events.push(e);
  }
  return events.sort((a, b) => a.at - b.at);
}
