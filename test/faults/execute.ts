// Runs a drawn schedule against the live run: each event fires at its time after the first transfer call,
// and the events of one resource (a worker slot, the Redis, the service, the organization's pause) run one
// after another, so a late one waits for its predecessor instead of tangling with it.
import { setTimeout as sleep } from 'node:timers/promises';
import { applyFault, type Applied, type Stage } from './apply-fault.ts';
import type { FaultEvent } from './draw-schedule.ts';

function resourceOf(e: FaultEvent): string {
  if (e.kind.startsWith('worker-')) return `slot ${e.slot ?? 0}`;
  return e.kind.split('-')[0] ?? e.kind;
}

/** Waits for the run's first transfer call (t0 of the schedule); fails after `timeoutMs`. */
export async function firstCall(stage: Stage, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const first = stage.h.sim.record.find((r) => r.method === 'PATCH');
    if (first) return first.receivedAt;
    if (Date.now() > deadline) throw new Error(`no transfer call reached the service within ${timeoutMs} ms`);
    await sleep(20);
  }
}

/** Applies every event at its time; resolves, in schedule order, when the last one has ended. */
export async function executeSchedule(
  stage: Stage,
  events: readonly FaultEvent[],
  t0: number,
): Promise<Applied[]> {
  const chains = new Map<string, Promise<unknown>>();
  const done = events.map(async (e) => {
    await sleep(Math.max(0, t0 + e.at - Date.now()));
    const resource = resourceOf(e);
    const previous = chains.get(resource) ?? Promise.resolve();
    const mine = previous.then(() => applyFault(stage, e, t0));
    chains.set(resource, mine);
    return mine;
  });
  return Promise.all(done);
}
