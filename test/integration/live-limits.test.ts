// Live controls while two `work` processes run: `pause` stops every new transfer of the
// organization within 5 s and `resume` lets them go on, `limits set --per-token` lowers the limit and
// the simulator's record holds it from 5 s after the change, and the change log names who did what
// and when. Compressed windows (2 s), the real CLI, the real simulator.
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readChanges, type ChangeEntry } from '../../src/limiter/control-log.ts';
import { POLICY_RECHECK_MS } from '../../src/limiter/policy.ts';
import { findViolations } from '../../src/simulator/violations.ts';
import { runCommand, spawnCli, waitExit, withoutNoPersistenceWarning } from '../helpers/cli.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';
import { waitForCount } from '../helpers/wait.ts';

let h: Harness;
const ids = learnersNotIn('acme', 150);
/** Within this of a change, every worker applies it (the bound). */
const APPLY_MS = 5_000;

beforeAll(async () => {
  h = await startHarness({
    tag: 'live',
    sim: {
      learners: 400,
      faults: { latencyAfterMs: [10, 60] },
      // The service allows what the tool is configured for; the lowered limit is checked on the record.
      limits: {
        perToken: { max: 10, windowMs: 2000 },
        perOrg: { max: 40, windowMs: 2000 },
        window: 'rolling',
      },
    },
    env: { LIMIT_PER_TOKEN: '10/2s', LIMIT_PER_ORG: '40/2s', REQUEST_TIMEOUT: '1s', LOG_LEVEL: 'warn' },
  });
});
afterAll(async () => {
  await h?.close();
});

const patches = () => h.sim.record.filter((r) => r.method === 'PATCH' && r.org === 'acme');

/** When the change was made: the change log's time, written right after the policy in Redis. */
async function changedAt(action: string): Promise<number> {
  const entry = (await readChanges(h.ctx.redis, h.ctx.keys, { org: 'acme' })).find(
    (e) => e.action === action,
  );
  if (!entry) throw new Error(`no '${action}' in the change log`);
  return Date.parse(entry.at);
}

describe('live limits and pause with two work processes', () => {
  it(
    'pause stops the transfers within 5 s, resume goes on, a lowered limit holds from 5 s after it',
    { timeout: 120_000 },
    async () => {
      await h.enqueueIds(ids);
      const workers = [
        spawnCli(['work', '--until-idle', '--concurrency', '4'], h.env),
        spawnCli(['work', '--until-idle', '--concurrency', '4'], h.env),
      ];
      // Listened to from the start: a worker may be done before the test waits for it.
      const exits = workers.map((w) => waitExit(w, 110_000));

      // (a) pause while both send.
      await waitForCount('transfers of the two workers', () => patches().length, 10, { everyMs: 50 });
      const pause = await runCommand(['pause', '--org', 'acme'], h.env);
      expect(withoutNoPersistenceWarning(pause.stderr).trim()).toBe('');
      expect(pause.stdout).toMatch(/paused organization 'acme'/);
      expect(pause.code).toBe(0);
      const pausedAt = await changedAt('pause');
      // Paused for longer than the bound, so that a worker that ignored it would show in the record.
      const [status] = await Promise.all([
        runCommand(['status'], h.env),
        sleep(Math.max(0, pausedAt + APPLY_MS + 2_000 - Date.now())),
      ]);
      expect(status.stdout).toMatch(/PAUSED by cli:/);
      const late = patches().filter((r) => r.receivedAt > pausedAt + APPLY_MS);
      expect(late, 'PATCHes received more than 5 s after the pause').toEqual([]);
      const lastAfterPause = Math.max(...patches().map((r) => r.receivedAt)) - pausedAt;
      expect(lastAfterPause).toBeLessThanOrEqual(APPLY_MS);
      const sentBeforeResume = patches().length;

      const resume = await runCommand(['resume', '--org', 'acme'], h.env);
      expect(resume.code).toBe(0);
      expect(resume.stdout).toMatch(/resumed organization 'acme'/);
      const resumedAt = await changedAt('resume');
      await waitForCount('transfers after the resume', () => patches().length, sentBeforeResume + 5, {
        everyMs: 50,
      });
      // Nothing went out between the pause's bound and the resume; then the workers went on. A worker
      // asleep on the pause asks again within POLICY_RECHECK_MS (3 s, src/limiter/policy.ts): how soon
      // after the resume is bounded with 5x headroom, so a busy machine cannot fail it and a worker that
      // slept on the pause's sentinel wait instead (a window, or for good) still does.
      const afterResume = patches().slice(sentBeforeResume);
      expect(afterResume.every((r) => r.receivedAt >= resumedAt)).toBe(true);
      const firstAfterResume = Math.min(...afterResume.map((r) => r.receivedAt)) - resumedAt;
      expect(firstAfterResume).toBeLessThan(5 * POLICY_RECHECK_MS);

      // (b) lower the per-token limit while both send, hold it, then set it back for the rest.
      const set = await runCommand(['limits', 'set', '--org', 'acme', '--per-token', '3/2s'], h.env);
      expect(set.code).toBe(0);
      expect(set.stdout).toMatch(/acme: perToken 10\/2s -> 3\/2s/);
      const loweredAt = await changedAt('limits.set');
      await sleep(Math.max(0, loweredAt + APPLY_MS + 6_000 - Date.now()));
      // The reset is written after this instant: every request counted before it was granted under 3/2s.
      const resetFrom = Date.now();
      const reset = await runCommand(['limits', 'reset', '--org', 'acme'], h.env);
      expect(reset.code).toBe(0);

      const held = patches().filter(
        (r) => r.countedAt !== undefined && r.countedAt >= loweredAt + APPLY_MS && r.countedAt < resetFrom,
      );
      expect(held.length).toBeGreaterThan(5);
      const lowered = { perToken: { max: 3, windowMs: 2000 }, window: 'rolling' as const };
      expect(findViolations(held, lowered, 'rolling')).toEqual([]);
      expect(findViolations(held, { ...lowered, window: 'fixed' }, 'fixed')).toEqual([]);

      // (c) the change log through the CLI while the workers finish: who and when, for each change.
      const [log, ...results] = await Promise.all([
        runCommand(['changes', '--org', 'acme'], h.env),
        ...exits,
      ]);
      for (const r of results) {
        expect(r.stderr).toMatch(/workers stopped \(idle\)/);
        expect(r.code).toBe(0);
      }
      expect(log.code).toBe(0);
      const lines = log.stdout.trim().split('\n');
      expect(lines.map((l) => l.split('  ')[2])).toEqual(['limits.reset', 'limits.set', 'resume', 'pause']);
      for (const l of lines) {
        const [at, who] = l.split('  ');
        expect(who).toMatch(/^cli:.+@.+/);
        expect(Date.parse(at ?? '')).toBeGreaterThan(Date.now() - 180_000);
      }
      expect(lines[1]).toMatch(/limits\.set {2}acme {2}perToken 10\/2s -> 3\/2s/);
      expect(lines[3]).toMatch(/pause {2}acme {2}paused - -> by cli:/);
      const entries: ChangeEntry[] = await readChanges(h.ctx.redis, h.ctx.keys, { org: 'acme' });
      expect(entries[1]?.details).toMatchObject({
        before: { perToken: '10/2s' },
        after: { perToken: '3/2s' },
      });

      // Nothing lost, nobody moved twice, never over the service's own limits, no 429.
      for (const id of ids) {
        const rec = await h.ctx.store.get('acme', id);
        expect(['transferred', 'already-in-org'], `learner ${id}: ${rec?.b}`).toContain(rec?.b);
        expect(h.sim.ownerChanges(id), `learner ${id}`).toBe(1);
      }
      expect(h.sim.violations()).toEqual([]);
      expect(patches().filter((r) => r.status === 429)).toEqual([]);

      // Figures for the closing note.
      console.log(
        `live-limits: last PATCH ${lastAfterPause} ms after the pause; first ${firstAfterResume} ms after the ` +
          `resume; ${held.length} PATCHes within 3/2s from 5 s after the lowered limit`,
      );
    },
  );
});
