// SIGTERM to `work` while transfers are in flight: it stops taking jobs, lets the ones in flight finish,
// and exits within its bound; nothing is lost (the learners it did not reach stay queued for the next).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { aimAtCallInFlight, expectAtStake } from '../helpers/at-stake.ts';
import { spawnCli, waitExit } from '../helpers/cli.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';
import { waitForCount } from '../helpers/wait.ts';

const CONCURRENCY = 4;

let h: Harness;
const ids = learnersNotIn('acme', 80);

beforeAll(async () => {
  h = await startHarness({
    tag: 'graceful',
    sim: { learners: 300, faults: { latencyAfterMs: [300, 600] } },
    env: { LIMIT_PER_TOKEN: '1000/1s', LIMIT_PER_ORG: '1000/1s', REQUEST_TIMEOUT: '3s', LOG_LEVEL: 'warn' },
  });
});
afterAll(async () => {
  await h?.close();
});

describe('work on SIGTERM', () => {
  it('finishes the transfers in flight, exits 130 in time, and leaves the rest queued', async () => {
    await h.enqueueIds(ids);
    const child = spawnCli(['work', '--concurrency', String(CONCURRENCY)], h.env);
    const patches = () => h.sim.record.filter((x) => x.method === 'PATCH');
    await waitForCount('transfer calls at the service', () => patches().length, 8);
    const stake = await aimAtCallInFlight(h.sim, ids, 'the SIGTERM');
    const signalledAt = Date.now();
    child.kill('SIGTERM');
    expectAtStake(stake);
    // Within its bound: the process stopped by itself, not by the forced exit after 30 s (its shutdown
    // bound); a hang fails waitExit.
    const r = await waitExit(child, 20_000);
    expect(r.stderr).toMatch(/SIGTERM received, shutting down/);
    expect(r.stderr).not.toMatch(/shutdown took over/);
    expect(r.stderr).toMatch(/workers stopped \(stopped\)/);
    expect(r.code).toBe(130);
    // It took no new job: the only calls after the signal are ones that already held a job then.
    const after = patches().filter((x) => x.receivedAt >= signalledAt);
    expect(after.length, 'calls received after SIGTERM').toBeLessThanOrEqual(CONCURRENCY);
    // Every call it made was answered before it exited.
    expect(patches().filter((x) => x.status === 0)).toEqual([]);

    // Every request the service saw got its answer recorded: nothing in flight was dropped.
    const seen = new Set(h.sim.record.filter((x) => x.method === 'PATCH').map((x) => x.learnerId));
    expect(seen.size).toBeGreaterThanOrEqual(8);
    expect(seen.size).toBeLessThan(ids.length);
    for (const id of ids) {
      const rec = await h.ctx.store.get('acme', id);
      if (seen.has(id)) expect(rec?.b, `learner ${id}`).toBe('transferred');
      else expect(rec?.b, `learner ${id}`).toBe('queued');
      expect(h.sim.ownerChanges(id)).toBeLessThanOrEqual(1);
    }
    const c = await h.ctx.queues.get('acme').getJobCounts('waiting', 'active', 'prioritized');
    expect(c.active).toBe(0);
    expect((c.waiting ?? 0) + (c.prioritized ?? 0)).toBe(ids.length - seen.size);
  });

  it('exits with a clear error, and does not hang, when its metrics port is taken', async () => {
    const { createServer } = await import('node:net');
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', () => resolve()));
    const port = (blocker.address() as { port: number }).port;
    try {
      const r = await waitExit(spawnCli(['work', '--metrics-port', String(port)], h.env), 20_000);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`--metrics-port: cannot listen on 127.0.0.1:${port} (EADDRINUSE)`);
      expect(r.stderr).not.toMatch(/\n\s+at /);
    } finally {
      blocker.close();
    }
  });
});
