// The end of a seeded run: every fault off, the organization resumed, then `work --until-idle` until
// nothing waits, beside the slots' own processes (which keep working meanwhile); then each slot's process
// is stopped (SIGTERM). A slot whose spool directory still holds a file then is replayed by a
// `work --until-idle` of its own; one that still holds a file after that, or a worker that does not
// become idle, is a violation.
import { readdirSync } from 'node:fs';
import { type CliResult, runCommand } from '../helpers/cli.ts';
import { newRedis } from '../helpers/redis.ts';
import type { Applied, Stage } from './apply-fault.ts';

export interface Drained {
  violations: string[];
  notes: string[];
  /** Responses replayed from spools over the whole run (by restarted slots and by the drain). */
  replayed: number;
}

/** Puts the service, Redis and the organization back to normal, whatever the schedule left. */
async function restore(stage: Stage, applied: readonly Applied[], notes: string[]): Promise<void> {
  stage.h.sim.setFaults(stage.base);
  stage.redis.freeze(false);
  if (!stage.redis.running) {
    notes.push('Redis was down at the drain: started');
    await stage.redis.start();
  }
  const admin = newRedis(stage.redis.url);
  await admin.config('SET', 'maxmemory', '0');
  admin.disconnect();
  const pauses = applied.filter((a) => a.event.kind === 'org-pause');
  if (pauses.some((a) => a.notes.at(-1) !== 'resume exit 0' && a.notes.some((n) => n === 'pause exit 0'))) {
    const r = await runCommand(['resume', '--org', 'acme'], stage.h.env, 30_000);
    stage.cli.push(r);
    notes.push(`acme was left paused: resume at the drain exited ${r.code}`);
  }
}

/** Spool files left in a slot's directory. */
function spoolFiles(stage: Stage, slot: number): string[] {
  try {
    return readdirSync(stage.slots.spoolDir(slot)).filter((f) => f.includes('.spool'));
  } catch {
    return []; // never created: no process of the slot opened a spool
  }
}

/** Runs `work --until-idle` in the slots given, concurrently; a violation for each that does not end idle. */
async function untilIdle(stage: Stage, slots: readonly number[], boundMs: number): Promise<string[]> {
  const results = await Promise.allSettled(slots.map((slot) => stage.slots.untilIdle(slot, boundMs)));
  return results.flatMap((r: PromiseSettledResult<CliResult>, i) => {
    const name = `the drain's worker in slot ${(slots[i] ?? 0) + 1}`;
    if (r.status === 'rejected') return [`${name} did not become idle: ${String(r.reason).slice(0, 1500)}`];
    const tail = r.value.stderr.trim().split('\n').slice(-5).join('\n');
    if (!/workers stopped \(idle\)/.test(r.value.stderr))
      return [`${name} did not stop idle (code ${r.value.code}):\n${tail}`];
    // 0: every learner it finished succeeded; 1: some failed (the run's refused learners).
    if (r.value.code !== 0 && r.value.code !== 1) return [`${name} exited ${r.value.code}:\n${tail}`];
    return [];
  });
}

export async function drain(stage: Stage, applied: readonly Applied[], boundMs: number): Promise<Drained> {
  const out: Drained = { violations: [], notes: [], replayed: 0 };
  await restore(stage, applied, out.notes);
  const { slots } = stage;
  const all = Array.from({ length: slots.count }, (_, slot) => slot);
  const idle = all.filter((slot) => !slots.running(slot));
  if (idle.length > 0)
    out.notes.push(`slot(s) ${idle.map((s) => s + 1).join(', ')} had no process at the drain`);
  out.violations.push(...(await untilIdle(stage, idle.length > 0 ? idle : [0], boundMs)));
  await slots.stopAll(stage.run.requestTimeoutMs + 15_000);
  const left = all.filter((slot) => spoolFiles(stage, slot).length > 0);
  if (left.length > 0) {
    out.notes.push(`slot(s) ${left.map((s) => s + 1).join(', ')} left spool files: replayed by the drain`);
    out.violations.push(...(await untilIdle(stage, left, boundMs)));
  }
  for (const slot of all) {
    const files = spoolFiles(stage, slot);
    if (files.length > 0) out.violations.push(`worker ${slot + 1}'s spool still holds ${files.join(', ')}`);
  }
  for (const text of slots.outputs())
    for (const m of text.matchAll(/replayed (\d+) responses from \d+ spool files/g))
      out.replayed += Number(m[1]);
  return out;
}
