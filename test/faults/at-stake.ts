// Whether a seed's faults had something at stake: a seed whose kill fell on an idle worker, or whose Redis
// crashed after the last learner moved, passes without proving anything. Every fault must have been put
// in place (a signal delivered, a write refused, clients killed, the pause command obeyed) while learners
// were still to move; a SIGKILL or SIGSTOP of a worker must have met calls in flight, and a Redis crash
// learners already moved. The fixed-seed test asserts there is nothing here; the runner prints it.
import type { SeedReport } from './run-seed.ts';

export function nothingAtStake(r: SeedReport): string[] {
  const out: string[] = [];
  const movable = r.run.movable.length;
  for (const a of r.applied) {
    const name = `${a.event.kind} at ${(a.startedAt / 1000).toFixed(2)} s`;
    if (!a.effective) out.push(`${name} took no effect (${a.notes.join('; ')})`);
    if (a.moved >= movable) out.push(`${name} fell after every learner had moved`);
    if (a.event.kind === 'redis-crash' && a.moved === 0) out.push(`${name} fell before any learner moved`);
  }
  const workers = r.applied.filter(
    (a) => a.event.kind !== 'worker-term' && a.event.kind.startsWith('worker-'),
  );
  if (workers.length > 0 && !workers.some((a) => a.inFlight > 0))
    out.push('no SIGKILL or SIGSTOP of a worker fell while calls were in flight');
  if (r.applied.length !== r.schedule.length) out.push('not every scheduled event was applied');
  return out;
}
