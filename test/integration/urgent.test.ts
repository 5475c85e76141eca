// Urgent learners: `enqueue --priority urgent` and the dashboard's "Move ahead of the
// queue" put a learner ahead of its organization's bulk. Proved on the simulator's request record: with
// the bulk (and jobs added the way the previous release added them) already waiting, one `work` process
// with concurrency 1 sends the urgent learners' PATCHes first. Also: the guarantees of the producer hold
// (nothing lost, one call per learner, a learner already transferred is not re-queued), a bad --priority
// is a usage error, and every urgent request is in the change log.
import { Worker } from 'bullmq';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildDashboard } from '../../src/dashboard/server.ts';
import { readChanges } from '../../src/limiter/control-log.ts';
import { queuePlace } from '../../src/queue/priority.ts';
import { jobIdOf } from '../../src/queue/job.ts';
import { runCommand, withoutNoPersistenceWarning } from '../helpers/cli.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';
import { basic, bearer, DASHBOARD_TOKEN } from '../helpers/dashboard.ts';

// Fast limits: the order is under test, not the budget (the urgent jobs go through the same limiter).
const ENV = { LIMIT_PER_TOKEN: '500/1s', LIMIT_PER_ORG: '1000/1s', DASHBOARD_TOKEN };

let h: Harness;
beforeEach(async () => {
  h = await startHarness({ tag: 'urgent', sim: { learners: 900 }, env: ENV });
});
afterEach(async () => {
  await h?.close();
});

/** Learner ids of the transfer calls the simulator received, in arrival order. */
function patchOrder(): number[] {
  return h.sim.record
    .filter((r) => r.method === 'PATCH' && r.learnerId !== undefined)
    .map((r) => r.learnerId as number);
}

async function enqueueCli(ids: readonly number[], name: string, extra: string[] = []) {
  const file = h.writeFile(name, `learnerId\n${ids.join('\n')}\n`);
  return runCommand(['enqueue', '--csv', file, '--org', 'acme', '--quiet', ...extra], h.env);
}

/** Workers in this process, one job at a time, until nothing waits (setup, and the dashboard's checks). */
async function workInProcess() {
  const r = await h.workUntilIdle({ concurrency: 1 });
  expect(r.reason).toBe('idle');
}

/** One `work` process, one job at a time, until nothing waits. */
async function workOnce() {
  const r = await runCommand(['work', '--org', 'acme', '--concurrency', '1', '--until-idle'], h.env, 120_000);
  expect(r.code, withoutNoPersistenceWarning(r.stderr)).toBe(0);
}

/** Jobs as the previous release added them: an outcome record and a job with only its id (no priority). */
async function addTheOldWay(ids: readonly number[], runId = '20250101T000000-0ld1'): Promise<void> {
  await h.ctx.store.markQueued(
    ids.map((learnerId) => ({ org: 'acme', learnerId, runId, source: 'old.csv', force: false })),
  );
  await h.ctx.queues.get('acme').addBulk(
    ids.map((learnerId) => ({
      name: 'transfer',
      data: { org: 'acme', learnerId, runId, source: 'old.csv' },
      opts: { jobId: jobIdOf(learnerId) },
    })),
  );
}

describe('enqueue --priority urgent', () => {
  it('puts urgent learners, new or already waiting, ahead of 200 waiting bulk learners and of old jobs', async () => {
    const ids = learnersNotIn('acme', 210);
    const old = ids.slice(0, 5);
    const bulk = ids.slice(5, 205);
    const urgent = ids.slice(205, 208);
    // Jobs of the previous release first: plain FIFO would take them before anything else.
    await addTheOldWay(old);
    await h.enqueueIds(bulk);
    expect(await h.ctx.queues.get('acme').getWaitingCount()).toBe(205);

    const r1 = await enqueueCli(urgent, 'urgent.csv', ['--priority', 'urgent']);
    expect(r1.code, r1.stderr).toBe(0);
    expect(r1.stdout).toMatch(/enqueued {3}3\n/);
    expect(r1.stdout).toContain(
      'urgent     3 put ahead of the bulk (3 added, 0 already waiting moved ahead)',
    );
    // Two learners deep in the bulk (the 150th and the last) made urgent: moved, not added again.
    const deep = [bulk[149] as number, bulk[199] as number];
    const r2 = await enqueueCli(deep, 'deep.csv', ['--priority', 'urgent']);
    expect(r2.code, r2.stderr).toBe(0);
    expect(r2.stdout).toContain('already queued 2');
    expect(r2.stdout).toContain(
      'urgent     2 put ahead of the bulk (0 added, 2 already waiting moved ahead)',
    );
    // Still one job per learner: nothing added twice, nothing lost.
    expect(await h.ctx.queues.get('acme').getWaitingCount()).toBe(208);
    expect(await queuePlace(h.ctx.redis, h.ctx.queues.get('acme'), deep[0] as number)).toMatchObject({
      state: 'waiting',
      position: 1,
      waiting: 208,
    });

    await workOnce();
    const order = patchOrder();
    // The latest urgent request first, each in its file's order; then the older urgent one; then the
    // previous release's jobs and the bulk in their FIFO order.
    expect(order.slice(0, 5)).toEqual([...deep, ...urgent]);
    expect(order.slice(5, 10)).toEqual(old);
    expect(order.slice(10)).toEqual(bulk.filter((id) => !deep.includes(id)));
    // One call per learner, every learner transferred exactly once.
    expect(order).toHaveLength(208);
    for (const id of [...old, ...bulk, ...urgent]) expect(h.sim.ownerChanges(id)).toBe(1);
    const states = await h.ctx.store.getMany('acme', [...old, ...bulk, ...urgent]);
    expect(states.every((s) => s?.b === 'transferred')).toBe(true);

    // The change log: one entry per urgent request, who (the CLI's user and host) and which learners.
    const changes = (await readChanges(h.ctx.redis, h.ctx.keys, { org: 'acme' })).reverse();
    expect(changes.map((c) => c.action)).toEqual(['priority.urgent', 'priority.urgent']);
    expect(changes[0]?.who).toMatch(/^cli:.+@.+/);
    expect(changes[0]?.details).toMatchObject({
      learnerIds: urgent,
      source: 'cli enqueue --csv urgent.csv',
      added: 3,
      moved: 0,
    });
    expect(changes[1]?.details).toMatchObject({
      learnerIds: deep,
      source: 'cli enqueue --csv deep.csv',
      moved: 2,
    });
  });

  it('keeps the guarantees: a transferred learner is not re-queued, a held one stays held, nothing is called twice', async () => {
    const [done, fresh, beta] = learnersNotIn('acme', 3);
    await h.enqueueIds([done as number]);
    await workInProcess();
    expect(patchOrder()).toEqual([done]);
    // A learner claimed by another organization stays there (one claim per learner), urgent or not.
    await h.ctx.claims.claim([{ org: 'beta', learnerId: beta as number }], 'claim');

    const r = await enqueueCli([done as number, fresh as number, beta as number], 'mixed.csv', [
      '--priority',
      'urgent',
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('already done   1 (1 transferred)');
    expect(r.stdout).toContain('urgent     1 put ahead of the bulk (1 added, 0 already waiting moved ahead)');
    expect(r.stderr).toContain(`learner ${beta} is claimed by organization 'beta'`);
    await workOnce();
    expect(patchOrder()).toEqual([done, fresh]);
    expect(h.sim.ownerChanges(done as number)).toBe(1);
    expect(await h.ctx.store.get('acme', beta as number)).toBeUndefined();
    const [entry] = await readChanges(h.ctx.redis, h.ctx.keys, { org: 'acme' });
    expect(entry?.details).toMatchObject({ learnerIds: [fresh], added: 1 });
  }, 120_000);

  it('refuses a bad --priority as a usage error naming the flag, and defaults to normal', async () => {
    const file = h.writeFile('one.csv', 'learnerId\n2\n');
    const bad = await runCommand(['enqueue', '--csv', file, '--org', 'acme', '--priority', 'high'], h.env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--priority');
    expect(bad.stderr).toContain("expects one of normal, urgent, got 'high'");
    expect(await h.ctx.store.get('acme', 2)).toBeUndefined();

    const normal = await runCommand(['enqueue', '--csv', file, '--org', 'acme', '--quiet'], h.env);
    expect(normal.code, normal.stderr).toBe(0);
    expect(normal.stdout).not.toContain('urgent');
    const explicit = await runCommand(
      ['enqueue', '--csv', file, '--org', 'acme', '--quiet', '--priority', 'normal'],
      h.env,
    );
    expect(explicit.code, explicit.stderr).toBe(0);
    expect(await readChanges(h.ctx.redis, h.ctx.keys)).toEqual([]);
  }, 120_000);
});

describe('the dashboard action "Move ahead of the queue"', () => {
  it('moves a waiting learner and a retrying one (waiting out its backoff) ahead, and explains other states', async () => {
    const app = await buildDashboard(h.ctx, { bullBoard: false });
    try {
      const ids = learnersNotIn('acme', 60);
      const bulk = ids.slice(0, 50);
      const retrying = ids[50] as number;
      const done = ids[51] as number;
      await h.enqueueIds([done]);
      await workInProcess();
      await h.enqueueIds(bulk);
      // A learner whose first attempt failed and waits out a long backoff: `retrying`, its job delayed.
      const { runId } = await h.enqueueIds([retrying]);
      const queue = h.ctx.queues.get('acme');
      const job = await queue.getJob(jobIdOf(retrying));
      await queue.remove(jobIdOf(retrying));
      await queue.add('transfer', job?.data as never, { jobId: jobIdOf(retrying), delay: 3_600_000 });
      await h.ctx.store.recordAttempt('acme', retrying, runId, {
        bucket: 'retrying',
        code: 'server-error',
        status: 500,
        durationMs: 5,
        countsAsAttempt: true,
      });
      const csrf = await csrfOf(app, `/learners/acme/${bulk[40]}`);
      const post = (id: number, headers: Record<string, string> = {}) =>
        app.inject({
          method: 'POST',
          url: `/api/learners/acme/${id}/urgent`,
          headers: { ...basic(DASHBOARD_TOKEN, 'ops-alice'), 'x-csrf-token': csrf, ...headers },
        });

      // A learner in a worker's hands (the head of the queue, taken by a bare BullMQ worker): nothing to
      // move, and the job is left where it is.
      const taker = new Worker(queue.name, undefined, {
        connection: h.ctx.redis,
        prefix: h.ctx.keys.prefix,
        autorun: false,
      });
      try {
        const active = await taker.getNextJob('urgent-test');
        expect(active?.id).toBe(jobIdOf(bulk[0] as number));
        const busy = await post(bulk[0] as number);
        expect(busy.statusCode).toBe(409);
        expect(busy.json()).toMatchObject({ error: 'in-flight' });
        expect(await active?.getState()).toBe('active');
        // Back to the head, where it was (as BullMQ does for a job the budget sends back).
        await active?.moveToWait('urgent-test');
      } finally {
        await taker.close();
      }

      // The page of a waiting learner shows its place and the button.
      const page = await app.inject({ url: `/learners/acme/${bulk[40]}`, headers: bearer });
      expect(page.body).toContain('waiting · 41 of 50 in the queue');
      expect(page.body).toContain('Move ahead of the queue');

      const moved = await post(bulk[40] as number);
      expect(moved.statusCode, moved.body).toBe(200);
      expect(moved.json()).toMatchObject({ result: 'moved', place: { state: 'waiting', position: 1 } });
      const retried = await post(retrying);
      expect(retried.statusCode, retried.body).toBe(200);
      expect(retried.json()).toMatchObject({ result: 'moved', place: { state: 'waiting', position: 1 } });
      expect(await queue.getWaitingCount()).toBe(51);

      // Other states are explained, not moved.
      const finished = await post(done);
      expect(finished.statusCode).toBe(409);
      expect(finished.json()).toMatchObject({ error: 'not-waiting' });
      expect(finished.json().message).toContain('already transferred');
      const failed = ids[52] as number;
      await h.ctx.store.markQueued([{ org: 'acme', learnerId: failed, runId, source: 't', force: false }]);
      await h.ctx.store.recordAttempt('acme', failed, runId, {
        bucket: 'forbidden',
        code: 'forbidden',
        status: 403,
        durationMs: 5,
        countsAsAttempt: true,
      });
      const refused = await post(failed);
      expect(refused.statusCode).toBe(409);
      expect(refused.json().message).toBe(
        `learner ${failed} is not in the queue (it ended forbidden): retry it to queue it again, then move it ahead`,
      );
      const unknown = await post(999_999);
      expect(unknown.statusCode).toBe(404);
      // No CSRF header: refused before anything is read.
      const forged = await app.inject({
        method: 'POST',
        url: `/api/learners/acme/${bulk[0]}/urgent`,
        headers: bearer,
      });
      expect(forged.statusCode).toBe(403);
      expect(forged.json().error).toBe('csrf');

      await workInProcess();
      expect(patchOrder().slice(1, 3)).toEqual([retrying, bulk[40]]);
      expect(patchOrder()).toHaveLength(52);
      const changes = (await readChanges(h.ctx.redis, h.ctx.keys, { org: 'acme' })).reverse();
      expect(
        changes.map((c) => [
          c.action,
          c.who.startsWith('dashboard:operator/ops-alice@'),
          c.details.learnerIds,
        ]),
      ).toEqual([
        ['priority.urgent', true, [bulk[40]]],
        ['priority.urgent', true, [retrying]],
      ]);
      expect(changes[0]?.details.source).toBe('dashboard');
    } finally {
      await app.close();
    }
  });

  it('is refused, and hidden, in read-only mode', async () => {
    const app = await buildDashboard(h.ctx, { bullBoard: false, readOnly: true });
    try {
      const [id] = learnersNotIn('acme', 1);
      await h.enqueueIds([id as number]);
      const page = await app.inject({ url: `/learners/acme/${id}`, headers: bearer });
      expect(page.body).toContain('waiting · 1 of 1 in the queue');
      expect(page.body).not.toContain('Move ahead of the queue');
      const csrf = await csrfOf(app, `/learners/acme/${id}`);
      const r = await app.inject({
        method: 'POST',
        url: `/api/learners/acme/${id}/urgent`,
        headers: { ...bearer, 'x-csrf-token': csrf },
      });
      expect(r.statusCode).toBe(403);
      expect(r.json().error).toBe('read-only');
      expect(await readChanges(h.ctx.redis, h.ctx.keys)).toEqual([]);
    } finally {
      await app.close();
    }
  });
});

async function csrfOf(app: Awaited<ReturnType<typeof buildDashboard>>, url: string): Promise<string> {
  const page = await app.inject({ url, headers: bearer });
  const m = /<meta name="csrf-token" content="([^"]+)"/.exec(page.body);
  if (!m?.[1]) throw new Error(`no csrf-token meta in ${url} (status ${page.statusCode})`);
  return m[1];
}
