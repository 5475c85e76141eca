// The `work` process's own metrics: its spool's backlog and what its repair sweeps find, all from
// memory (no Redis read at scrape time).
import { Counter, Gauge, type Registry } from 'prom-client';
import type { RepairReport } from '../actions/repair.ts';

/** What the spool gauges read: entries not yet in Redis, and when the oldest was written (ms). */
export interface SpoolState {
  entries: number;
  oldestAt: number | null;
}

export function spoolGauges(registry: Registry, read: () => SpoolState, now = () => Date.now()): void {
  new Gauge({
    name: 'lt_spool_entries',
    help: "Responses in this process's write-ahead spool whose outcome is not yet in Redis",
    registers: [registry],
    collect() {
      this.set(read().entries);
    },
  });
  new Gauge({
    name: 'lt_spool_oldest_entry_age_seconds',
    help: 'How long the oldest spool entry not yet in Redis has waited; 0 when the spool is empty',
    registers: [registry],
    collect() {
      const at = read().oldestAt;
      this.set(at === null ? 0 : Math.max(0, (now() - at) / 1000));
    },
  });
}

export type RepairCounter = Counter<'kind'>;

/**
 * Learners the repair sweeps found without a way forward: `stranded` (recorded queued or retrying with
 * no job) and `orphan-job` (a job with no record). Both series start at 0, so rate() sees the first.
 */
export function repairCounter(registry: Registry): RepairCounter {
  const counter = new Counter({
    name: 'lt_repair_found_total',
    help: 'Learners the repair sweep found without a way forward, by kind: stranded (waiting with no job) or orphan-job (a job with no record)',
    labelNames: ['kind'],
    registers: [registry],
  });
  counter.inc({ kind: 'stranded' }, 0);
  counter.inc({ kind: 'orphan-job' }, 0);
  return counter;
}

export function countRepair(counter: RepairCounter, r: RepairReport): void {
  if (r.stranded > 0) counter.inc({ kind: 'stranded' }, r.stranded);
  if (r.orphanJobs > 0) counter.inc({ kind: 'orphan-job' }, r.orphanJobs);
}
