// One owner, one call, the record first, each scenario ending in the outcome store check (every
// learner in one known final state, none moved twice, every revoked authorization in the audit) and zero
// overlapping calls for one learner:
// - a CSV that names learners under two organizations, and a later run that tries again;
// - a crawl for a second organization after the first one's run;
// - Redis paused for longer than the job lock while calls are slow, two worker processes;
// - a SIGKILL after the response is spooled, and after it is recorded;
// - a crash inside `retry` after the records are marked and before the jobs are added.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { runCli, runCommand, spawnCli, waitExit } from '../helpers/cli.ts';
import { atStake, expectAtStake, learnersPending } from '../helpers/at-stake.ts';
import { expectOutcomes } from '../helpers/outcomes-check.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';
import { startOwnRedis, type OwnRedis } from '../helpers/redis-server.ts';
import { waitForCount } from '../helpers/wait.ts';

const TWO_ORGS = 'acme:sim-acme-1,acme:sim-acme-2,beta:sim-beta-1';
let h: Harness | undefined;
const servers: OwnRedis[] = [];
afterEach(async () => {
  await h?.close();
  h = undefined;
});
afterAll(async () => {
  for (const s of servers) await s.close();
});

/** Learners of gamma (neither acme's nor beta's): a transfer into either organization moves them. */
function gammaLearners(count: number, from = 3): number[] {
  const ids: number[] = [];
  for (let id = from; ids.length < count; id++) if ((id - 1) % 3 === 2) ids.push(id);
  return ids;
}

describe('one owner per learner', () => {
  it('a CSV naming learners under two organizations moves each once, into the first; a later run is refused', async () => {
    h = await startHarness({
      tag: 'int-csv',
      sim: { learners: 200, repeatMode: 'mixed', faults: { latencyAfterMs: [20, 80] } },
      env: { LEARNER_API_TOKENS: TWO_ORGS },
    });
    const shared = gammaLearners(15);
    const betaOnly = gammaLearners(5, 60);
    const rows = [
      'org,learnerId',
      ...shared.map((id) => `acme,${id}`),
      ...shared.map((id) => `beta,${id}`),
      ...betaOnly.map((id) => `beta,${id}`),
    ];
    const file = h.writeFile('two-orgs.csv', `${rows.join('\n')}\n`);
    const first = await runCommand(['enqueue', '--csv', file, '--quiet'], h.env);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toMatch(/enqueued\s+20/);
    expect(first.stdout).toMatch(/rejected\s+15/);
    // Each refused row names the file, its line, the learner and the organization holding it.
    const line = 2 + shared.length; // the first beta row
    expect(first.stderr).toContain(
      `${file}:${line}: learner ${shared[0]} is claimed by organization 'acme' on line 2 of two-orgs.csv`,
    );

    // A later run that names acme's learners under beta: refused the same way, the rest goes through.
    const later = h.writeFile(
      'later.csv',
      `org,learnerId\nbeta,${shared[3]}\nbeta,${gammaLearners(1, 90)[0]}\n`,
    );
    const second = await runCommand(['enqueue', '--csv', later, '--quiet'], h.env);
    expect(second.code, second.stderr).toBe(0);
    expect(second.stderr).toContain(
      `${later}:2: learner ${shared[3]} is claimed by organization 'acme' (an earlier line or run)`,
    );
    expect(second.stdout).toMatch(/enqueued\s+1\b/);

    const work = await runCommand(['work', '--until-idle', '--concurrency', '6'], h.env, 120_000);
    expect(work.code, work.stderr.slice(-2000)).toBe(0);
    await expectOutcomes(h.ctx, h.sim, { org: 'acme', ids: shared });
    await expectOutcomes(h.ctx, h.sim, {
      org: 'beta',
      ids: [...betaOnly, gammaLearners(1, 90)[0] as number],
      orgId: 2,
    });
    for (const id of shared) {
      expect(h.sim.ownerChanges(id), `learner ${id}`).toBe(1);
      expect(h.sim.learner(id)?.organizationId).toBe(1);
    }
    expect(h.sim.overlaps()).toEqual([]);
  }, 180_000);

  it("a crawl for a second organization skips the learners the first one's run holds", async () => {
    h = await startHarness({
      tag: 'int-crawl',
      sim: { learners: 60, repeatMode: 'error' },
      env: { LEARNER_API_TOKENS: TWO_ORGS, LIMIT_PER_TOKEN: '100/1s', LIMIT_PER_ORG: '200/1s' },
    });
    const acmeIds = learnersNotIn('acme', 20);
    await h.enqueueIds(acmeIds, 'acme');
    expect((await h.workUntilIdle({ orgs: ['acme'] })).reason).toBe('idle');

    const crawl = await runCommand(['crawl', '--org', 'beta', '--target-org-id', '2', '--quiet'], h.env);
    expect(crawl.code, crawl.stderr).toBe(0);
    expect(crawl.stdout).toMatch(
      new RegExp(`claimed elsewhere ${acmeIds.length} \\(claimed by acme ${acmeIds.length}`),
    );
    const work = await runCommand(['work', '--until-idle', '--org', 'beta'], h.env, 120_000);
    expect(work.code, work.stderr.slice(-2000)).toBe(0);
    for (const id of acmeIds) {
      expect(h.sim.ownerChanges(id), `learner ${id}`).toBe(1);
      expect(h.sim.learner(id)?.organizationId, `learner ${id}`).toBe(1);
      expect(await h.ctx.store.get('beta', id), `learner ${id} in beta`).toBeUndefined();
    }
    await expectOutcomes(h.ctx, h.sim, { org: 'acme', ids: acmeIds });
    // beta took everyone else who was not already in beta: the learners acme never claimed.
    const betaRecorded: number[] = [];
    for await (const [id] of h.ctx.store.scan('beta')) betaRecorded.push(id);
    expect(betaRecorded.length).toBeGreaterThan(0);
    await expectOutcomes(h.ctx, h.sim, { org: 'beta', ids: betaRecorded, orgId: 2 });

    // Moving one of acme's learners is an explicit act, written in beta's audit.
    const moveFile = h.writeFile('move.csv', `learnerId\n${acmeIds[0]}\n`);
    const move = await runCommand(
      ['enqueue', '--csv', moveFile, '--org', 'beta', '--move', '--quiet'],
      h.env,
    );
    expect(move.code, move.stderr).toBe(0);
    expect(move.stdout).toMatch(/moved\s+1 from another organization/);
    const entries = [];
    for await (const e of h.ctx.store.audit('beta')) if (e.learnerId === acmeIds[0]) entries.push(e);
    expect(entries.map((e) => e.kind)).toEqual(['claim-move']);
    expect(entries[0]?.result).toMatchObject({ claimMoved: { from: 'acme', to: 'beta' } });
  }, 180_000);
});

describe('one call in flight per learner', () => {
  it('Redis paused longer than the job lock while calls are slow, two workers: no overlap, none moved twice', async () => {
    const redis = await startOwnRedis();
    servers.push(redis);
    h = await startHarness({
      tag: 'int-pause',
      redisUrl: redis.url,
      sim: {
        learners: 300,
        repeatMode: 'mixed',
        faults: { latencyAfterMs: [400, 900] },
      },
      // The job lock is REQUEST_TIMEOUT + 5 s = 6 s; Redis is paused for 8 s.
      env: { REQUEST_TIMEOUT: '1s', LIMIT_PER_TOKEN: '200/1s', LIMIT_PER_ORG: '400/1s', LOG_LEVEL: 'warn' },
    });
    const harness = h;
    const ids = learnersNotIn('acme', 60);
    await harness.enqueueIds(ids);
    const workers = [0, 1].map(() => spawnCli(['work', '--until-idle', '--concurrency', '8'], harness.env));
    await waitForCount(
      'transfer calls at the service',
      () => harness.sim.record.filter((r) => r.method === 'PATCH').length,
      10,
    );
    const pauser = new Redis(redis.url);
    await pauser.ping();
    // Calls take 400-900 ms: the pause meets the ones in flight, whose leases and job locks it outlasts.
    const stake = atStake(harness.sim, ids, 'the Redis pause');
    await pauser.call('CLIENT', 'PAUSE', '8000', 'ALL');
    expectAtStake(stake);
    await sleep(8500);
    pauser.disconnect();
    const results = await Promise.all(workers.map((w) => waitExit(w, 150_000)));
    for (const r of results) expect(r.stderr).toMatch(/workers stopped \(idle\)/);
    await expectOutcomes(harness.ctx, harness.sim, { org: 'acme', ids });
    expect(harness.sim.overlaps()).toEqual([]);
  }, 200_000);
});

describe('the record first', () => {
  for (const step of ['after-spool', 'after-finish'] as const) {
    it(`a SIGKILL ${step.replace('-', ' ')}: the next work replays the spool, everything is on record`, async () => {
      h = await startHarness({
        tag: step === 'after-spool' ? 'int-kspool' : 'int-kfin',
        sim: { learners: 120, repeatMode: 'mixed', faults: { latencyAfterMs: [10, 40] } },
        env: { LOG_LEVEL: 'info' },
      });
      const ids = learnersNotIn('acme', 30);
      await h.enqueueIds(ids);
      // One call at a time, so the kill falls with no other call in flight (whose answer it would lose).
      const killed = await runCli(['work', '--concurrency', '1'], {
        ...h.env,
        LT_FAULT_KILL_AT: `${step}:5`,
      });
      expect(killed.signal).toBe('SIGKILL');
      // The kill fell mid-run: learners were still to be called.
      expect(learnersPending(h.sim, ids), 'learners pending at the kill').toBeGreaterThan(0);
      const spool = join(h.dir, 'spool');
      const last = await runCommand(['work', '--until-idle', '--concurrency', '4'], h.env, 120_000);
      expect(last.code, last.stderr.slice(-2000)).toBe(0);
      if (step === 'after-spool') {
        // The response the kill fell after was in the spool, and the next process replayed it.
        expect(last.stderr).toMatch(/replayed [1-9]\d* responses from 1 spool files/);
      }
      const tally = await expectOutcomes(h.ctx, h.sim, { org: 'acme', ids });
      expect((tally.transferred?.length ?? 0) + (tally['already-in-org']?.length ?? 0)).toBe(ids.length);
      // Nothing marked a possible repeat: no answer was lost, whichever step the kill fell on.
      for (const id of ids) {
        const rec = await h.ctx.store.get('acme', id);
        const calls = h.sim.record.filter((r) => r.method === 'PATCH' && r.learnerId === id);
        expect(
          rec?.pr,
          `learner ${id}: ${JSON.stringify(rec)} ${JSON.stringify(calls)} ${killed.stderr
            .split('\n')
            .filter((l) => /learnerId|LT_FAULT/.test(l))
            .join('\n')}`,
        ).toBeUndefined();
      }
      expect(h.sim.overlaps()).toEqual([]);
      // Every spool file was replayed or retired: none is left behind.
      expect(readdirSync(spool).filter((f) => f.includes('.spool'))).toEqual([]);
    }, 180_000);
  }
});

describe('no learner without a way forward', () => {
  it('a crash inside retry leaves learners queued without a job: repair finds them, work finishes them', async () => {
    h = await startHarness({
      tag: 'int-retry',
      sim: { learners: 100, repeatMode: 'error', faults: { errorRate: 1 } },
      // Every learner fails on purpose, then is retried: the error budget would halt acme, so it is off.
      env: { ATTEMPTS: '1', HALT_AT: 'off' },
    });
    const ids = learnersNotIn('acme', 12);
    await h.enqueueIds(ids);
    const first = await h.workUntilIdle();
    expect(first.failed).toBe(ids.length);
    h.sim.setFaults({});

    const crashed = await runCli(['retry', '--org', 'acme'], { ...h.env, LT_FAULT_KILL_AT: 'after-mark' });
    expect(crashed.signal).toBe('SIGKILL');
    for (const id of ids) expect((await h.ctx.store.get('acme', id))?.b).toBe('queued');

    const check = await runCommand(['repair', '--dry-run'], h.env);
    expect(check.code, check.stderr).toBe(1);
    expect(check.stdout).toContain(`acme: ${ids.length} waiting without a job (0 re-added)`);

    const work = await runCommand(['work', '--until-idle'], h.env, 120_000);
    expect(work.code, work.stderr.slice(-2000)).toBe(0);
    const tally = await expectOutcomes(h.ctx, h.sim, { org: 'acme', ids });
    expect(tally.transferred?.length).toBe(ids.length);
    const after = await runCommand(['repair', '--dry-run'], h.env);
    expect(after.code).toBe(0);
    expect(after.stdout).toContain('nothing to repair');
  }, 120_000);
});
