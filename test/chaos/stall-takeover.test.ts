// A worker frozen (SIGSTOP) so long that another worker takes its learners over (stall.test.ts has the
// shorter freezes): the woken worker's answer is still on record, and its late write neither frees the new
// owner's lease nor overwrites its outcome.
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { spawnCli, waitExit } from '../helpers/cli.ts';
import { atStake, callsInFlight, expectAtStake } from '../helpers/at-stake.ts';
import { expectOutcomes } from '../helpers/outcomes-check.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';
import type { RequestRecord } from '../../src/simulator/index.ts';
import { waitFor, waitUntil } from '../helpers/wait.ts';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const patches = (harness: Harness): RequestRecord[] => harness.sim.record.filter((r) => r.method === 'PATCH');

describe('a worker frozen past its lease', () => {
  it("frozen until another worker took the learners over: its answers are on record, its late writes leave the new owner's lease and outcome alone", async () => {
    h = await startHarness({
      tag: 'stall-takeover',
      sim: { learners: 60, repeatMode: 'error', faults: { latencyAfterMs: [2500, 3000] } },
      // The job lock is REQUEST_TIMEOUT + 5 s = 9 s and the lease 8 s (+ 1 s grace): a 25 s freeze loses both.
      env: { REQUEST_TIMEOUT: '4s', LIMIT_PER_TOKEN: '200/1s', LIMIT_PER_ORG: '400/1s', LOG_LEVEL: 'info' },
    });
    const harness = h;
    const ids = learnersNotIn('acme', 3);
    await harness.enqueueIds(ids);
    const leaseOf = (id: number) => harness.ctx.redis.hget(harness.ctx.keys.lease('acme'), String(id));
    const callsOf = (id: number) => patches(harness).filter((r) => r.learnerId === id);

    const a = spawnCli(['work', '--until-idle', '--concurrency', '3'], harness.env);
    await waitFor(
      'all 3 calls of worker A in flight',
      () => callsInFlight(harness.sim),
      (n) => n === 3,
    );
    const leasesOfA = await Promise.all(ids.map(leaseOf));
    const stake = atStake(harness.sim, ids, "worker A's freeze");
    a.kill('SIGSTOP');
    expectAtStake(stake, 3);
    // Worker B finds A's jobs stalled, waits out A's leases and their grace, and calls again.
    const b = spawnCli(['work', '--until-idle', '--concurrency', '3'], {
      ...harness.env,
      SPOOL_DIR: join(harness.dir, 'spool-b'),
    });
    const taken = await waitFor(
      "worker B's call for a learner A holds",
      () => ids.find((id) => callsOf(id).length === 2 && callsOf(id)[1]?.status === 0) ?? 0,
      (id) => id > 0,
      { timeoutMs: 60_000, show: () => JSON.stringify(ids.map((id) => callsOf(id).map((r) => r.status))) },
    );
    const leaseOfB = await leaseOf(taken);
    expect(leaseOfB, 'the lease was taken over').not.toBe(leasesOfA[ids.indexOf(taken)]);
    // A's own call was answered during the freeze, before B's began: never two in flight.
    const [first] = callsOf(taken);
    expect(first?.effectApplied).toBe(true);
    a.kill('SIGCONT');

    // A wakes and records the answer it had: the learner's transfer, with what it revoked. B is still in
    // flight (its answer takes 2.5 s or more), and A's write left B's lease in place.
    await waitUntil(
      "A's record of the transfer",
      async () => (await harness.ctx.store.get('acme', taken))?.b === 'transferred',
    );
    expect(callsOf(taken)[1]?.status, "B's call still in flight when A recorded").toBe(0);
    expect(await leaseOf(taken), "B's lease after A's late write").toBe(leaseOfB);

    const [ra, rb] = await Promise.all([waitExit(a, 120_000), waitExit(b, 120_000)]);
    expect(rb.code, rb.stderr.slice(-3000)).toBe(0);
    expect(ra.signal, ra.stderr.slice(-2000)).toBeNull();
    // B's 400 "already associated" came after A's transfer: the record keeps the transfer (with its id),
    // and nothing is a possible repeat, since the transfer's own answer is on record.
    const rec = (await harness.ctx.store.getWithStory('acme', taken))?.record;
    expect(rec?.b).toBe('transferred');
    expect(rec?.x).toBe(harness.sim.transfersOf(taken)[0]?.data.transferDetails.transferId);
    expect(rec?.pr).toBeUndefined();
    expect(rec?.h?.map((e) => e[1])).toEqual(expect.arrayContaining(['transferred', 'already-in-org']));
    await expectOutcomes(harness.ctx, harness.sim, { org: 'acme', ids });
    expect(harness.sim.overlaps()).toEqual([]);
    expect(await leaseOf(taken)).toBeNull();
  }, 180_000);
});
