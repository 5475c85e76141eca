// A worker process killed with SIGKILL mid-run, then another started: nothing lost (every learner ends
// in a final state), nothing transferred twice (the simulator saw each learner change owner once).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { aimAtCallInFlight, expectAtStake } from '../helpers/at-stake.ts';
import { runCommand, spawnCli, waitExit } from '../helpers/cli.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';
import { waitForCount } from '../helpers/wait.ts';

let h: Harness;
const ids = learnersNotIn('acme', 160);

beforeAll(async () => {
  h = await startHarness({
    tag: 'kill',
    sim: {
      learners: 400,
      repeatMode: 'mixed',
      faults: { latencyAfterMs: [50, 250] },
      limits: {
        perToken: { max: 40, windowMs: 2000 },
        perOrg: { max: 80, windowMs: 2000 },
        window: 'rolling',
      },
    },
    env: { LIMIT_PER_TOKEN: '40/2s', LIMIT_PER_ORG: '80/2s', REQUEST_TIMEOUT: '1s', LOG_LEVEL: 'warn' },
  });
});
afterAll(async () => {
  await h?.close();
});

describe('SIGKILL of a worker mid-run', () => {
  it('loses nothing and transfers nobody twice', async () => {
    await h.enqueueIds(ids);

    const first = spawnCli(['work', '--concurrency', '8'], h.env);
    // Kill it while requests are in flight: once some transfers have happened, at a call in flight.
    await waitForCount('learners moved', () => h.sim.record.filter((r) => r.effectApplied).length, 30);
    const stake = await aimAtCallInFlight(h.sim, ids, 'the SIGKILL');
    first.kill('SIGKILL');
    expectAtStake(stake);
    const killed = await waitExit(first);
    expect(killed.signal).toBe('SIGKILL');
    const before = h.sim.record.filter((r) => r.effectApplied).length;
    expect(before).toBeLessThan(ids.length);

    const second = await runCommand(['work', '--until-idle', '--concurrency', '8'], h.env, 120_000);
    expect(second.stderr).toMatch(/workers stopped \(idle\)/);
    expect(second.code).toBe(0);

    for (const id of ids) {
      const r = await h.ctx.store.get('acme', id);
      expect(['transferred', 'already-in-org'], `learner ${id}: ${r?.b}`).toContain(r?.b);
      expect(h.sim.ownerChanges(id), `learner ${id}`).toBe(1);
    }
    expect(h.sim.violations()).toEqual([]);
    expect(h.sim.record.filter((r) => r.status === 429)).toEqual([]);
    for (const secret of ['sim-acme-1', 'sim-acme-2']) {
      expect(second.stderr).not.toContain(secret);
      expect(killed.stderr).not.toContain(secret);
    }
  });
});
