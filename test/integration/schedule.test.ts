// schedule: a BullMQ job scheduler on the control queue makes the running `work` fleet perform a
// reconcile on its own, which produces a run with the drift enqueued; schedules can be listed and removed.
import { tmpdir } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  listSchedules,
  openControlQueue,
  upsertSchedule,
  type ControlQueue,
} from '../../src/queue/control.ts';
import { LanesDue } from '../../src/queue/lanes-due.ts';
import type { RunMeta } from '../../src/outcomes/runs.ts';
import { startControlWorker } from '../../src/worker/control-worker.ts';
import { runCommand, spawnCli, waitExit, withoutNoPersistenceWarning } from '../helpers/cli.ts';
import { startHarness, type Harness } from '../helpers/pipeline.ts';
import { waitFor } from '../helpers/wait.ts';

let h: Harness;
let queue: ControlQueue;

beforeAll(async () => {
  // The harness writes its files under the system temp directory: scheduled reconciles may read there.
  h = await startHarness({
    tag: 'schedule',
    sim: { learners: 300 },
    env: { LOG_LEVEL: 'warn', SCHEDULE_DIR: tmpdir() },
  });
  queue = openControlQueue(h.ctx.redis, h.ctx.keys);
});
afterAll(async () => {
  await queue?.close();
  await h?.close();
});

async function waitForRun(what: string, pred: (r: RunMeta) => boolean): Promise<RunMeta> {
  const runs = await waitFor(
    what,
    () => h.ctx.runs.list(100),
    (list) => list.some(pred),
    {
      everyMs: 50,
      show: (list) => `runs ${JSON.stringify(list.map((r) => r.source))}`,
    },
  );
  const run = runs.find(pred);
  if (!run) throw new Error(`${what}: gone after it was seen`);
  return run;
}

describe('schedule', () => {
  it('fires on its interval in a control worker and produces a reconcile run with the drift enqueued', async () => {
    const desired = h.writeFile('nightly.csv', 'learnerId,org\n2,acme\n3,acme\n4,acme\n');
    await upsertSchedule(
      queue,
      {
        id: 'nightly',
        every: 300,
        data: { kind: 'reconcile', scheduleId: 'nightly', desired, orgIds: { acme: 1 } },
      },
      new LanesDue(h.ctx.redis, h.ctx.keys),
    );
    expect((await listSchedules(queue)).map((s) => [s.key, s.every])).toEqual([['nightly', 300]]);
    const control = startControlWorker(h.ctx);
    try {
      const run = await waitForRun('a run of schedule nightly', (r) =>
        r.source.startsWith('schedule nightly'),
      );
      expect(run.kind).toBe('reconcile');
      expect(run.orgs).toEqual(['acme']);
      // The run is written before its learners are marked queued and their jobs added (markQueued, then
      // addBulk): wait for the job, then the counters are in.
      const job = await waitFor(
        "learner 2's job in acme's queue",
        () => h.ctx.queues.get('acme').getJob('l2'),
        (j) => j !== undefined,
        { everyMs: 50, show: (j) => (j ? String(j.id) : 'no job') },
      );
      expect(job?.data.runId).toBe(run.id);
      const counts = await h.ctx.store.runCounts('acme', run.id);
      // 2 and 3 sit in beta and gamma; 4 is already in acme.
      expect(counts.queued).toBe(2);
    } finally {
      expect(await queue.removeJobScheduler('nightly')).toBe(true);
      await control.close();
    }
    expect(await listSchedules(queue)).toEqual([]);
  });

  it('schedule, list and remove from the CLI; the `work` command runs the schedule', async () => {
    const desired = h.writeFile('cli-desired.csv', 'learnerId,org\n5,acme\n');
    const made = await runCommand(
      ['schedule', '--every', '400ms', 'reconcile', '--desired', desired, '--org-id', 'acme=1'],
      h.env,
    );
    expect(withoutNoPersistenceWarning(made.stderr)).toBe('');
    expect(made.code).toBe(0);
    expect(made.stdout).toContain('schedule reconcile-cli-desired saved');
    const listed = await runCommand(['schedule', 'list'], h.env);
    expect(listed.stdout).toMatch(/reconcile-cli-desired {2}reconcile {2}every 400 ms/);
    expect(listed.stdout).toContain(desired);

    const work = spawnCli(['work', '--concurrency', '1'], h.env);
    try {
      const run = await waitForRun('a run of schedule reconcile-cli-desired', (r) =>
        r.source.startsWith('schedule reconcile-cli-desired'),
      ).catch((err: Error) => {
        throw new Error(`${err.message}; work stderr:\n${work.output.stderr.slice(-2000)}`);
      });
      expect(run.kind).toBe('reconcile');
      // The same process then transferred the drift: learner 5 (beta) is in acme.
      await waitFor(
        "learner 5's organization in the simulator to be acme's (1)",
        () => h.sim.learner(5)?.organizationId,
        (org) => org === 1,
        { everyMs: 50 },
      );
    } finally {
      work.kill('SIGTERM');
      await waitExit(work);
    }
    const removed = await runCommand(['schedule', 'remove', 'reconcile-cli-desired'], h.env);
    expect(removed.code).toBe(0);
    expect((await runCommand(['schedule', 'list'], h.env)).stdout.trim()).toBe('no schedules');
    const again = await runCommand(['schedule', 'remove', 'reconcile-cli-desired'], h.env);
    expect(again.code).toBe(2);
    expect(again.stderr).toContain("no schedule 'reconcile-cli-desired'");
  });

  it('refuses a schedule without a time, or with an organization whose id is unknown', async () => {
    const desired = h.writeFile('g.csv', 'learnerId,org\n5,acme\n');
    const noWhen = await runCommand(['schedule', 'reconcile', '--desired', desired], h.env);
    expect(noWhen.code).toBe(2);
    expect(noWhen.stderr).toContain('exactly one of --cron');
    await h.ctx.redis.del(h.ctx.keys.orgIds());
    const noId = await runCommand(['schedule', '--every', '1h', 'reconcile', '--desired', desired], h.env);
    expect(noId.code).toBe(2);
    expect(noId.stderr).toContain('--org-id acme=N');
    expect(await listSchedules(queue)).toEqual([]);
    const badCron = await runCommand(
      ['schedule', '--cron', 'not a cron', 'reconcile', '--desired', desired, '--org-id', 'acme=1'],
      h.env,
    );
    expect(badCron.code).toBe(2);
    expect(badCron.stderr).toContain("schedule 'reconcile-g'");
  });
});
