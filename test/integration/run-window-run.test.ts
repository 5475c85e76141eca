// Run windows and pacing on compressed time, with the real workers and the real simulator. The run window
// is written as the UTC instants acquire.lua reads (the policy's `open` field: two windows of a few
// seconds; the calendar that computes them from days, hours and a time zone is tested on its own, with a
// fake clock, in test/unit/run-window.test.ts), and the burst is 4 for every bucket. From the simulator's
// record: no transfer reached the service outside a window, none was lost at its edges (every learner is
// transferred, both windows were used to their end), the service never answered 429, and each token's
// calls follow its bucket.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collectStatus } from '../../src/ops/views/status.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';

let h: Harness;
const ids = learnersNotIn('acme', 50);

beforeAll(async () => {
  h = await startHarness({
    tag: 'runwin',
    sim: {
      learners: 300,
      faults: { latencyAfterMs: [2, 10] },
      limits: {
        perToken: { max: 20, windowMs: 2000 },
        perOrg: { max: 60, windowMs: 4000 },
        window: 'rolling',
      },
    },
    env: { LIMIT_PER_TOKEN: '20/2s', LIMIT_PER_ORG: '60/4s', LIMIT_BURST: '4', LOG_LEVEL: 'warn' },
  });
});
afterAll(async () => {
  await h?.close();
});

const patches = () => h.sim.record.filter((r) => r.method === 'PATCH' && r.org === 'acme');

/** A call granted at the last ms of a window reaches the service this much later at most (latency <= 10 ms). */
const SEND_SLACK_MS = 250;

describe('run windows and pacing, compressed', () => {
  it(
    'sends nothing outside the windows, loses nothing at their edges, and paces each token',
    { timeout: 60_000 },
    async () => {
      const [sec] = await h.ctx.redis.time();
      const t0 = Number(sec) * 1000;
      const windows: Array<[number, number]> = [
        [t0 + 1500, t0 + 3500],
        [t0 + 5500, t0 + 8500],
      ];
      // What `limits set --run-window` writes, on a compressed clock: a horizon, then the open intervals.
      await h.ctx.redis.hset(
        h.ctx.keys.policy('acme'),
        'open',
        [t0 + 600_000, ...windows.flat()].join(' '),
        'runWindow',
        'all all',
      );
      await h.enqueueIds(ids);
      // The ETA before any work: it must count the closed stretches (and the buckets).
      const eta = (await collectStatus(h.ctx, ['acme'])).orgs[0]?.eta;
      const result = await h.workUntilIdle({ concurrency: 6 });
      expect(result.failed ?? 0).toBe(0);

      const calls = patches();
      // Every learner transferred once: nothing lost at an edge.
      expect(new Set(calls.filter((c) => c.status === 200).map((c) => c.learnerId)).size).toBe(ids.length);
      expect(calls.filter((c) => c.status === 429)).toEqual([]);
      // No call outside a window (a grant at its last ms arrives within the slack).
      const outside = calls.filter(
        (c) => !windows.some(([s, e]) => c.receivedAt >= s && c.receivedAt < e + SEND_SLACK_MS),
      );
      expect(outside.map((c) => c.receivedAt - t0)).toEqual([]);
      // Both windows used: the first to its end (the work did not fit it), the rest in the second.
      const first = calls.filter((c) => c.receivedAt < windows[1]![0]);
      expect(first.length).toBeGreaterThan(15);
      expect(Math.max(...first.map((c) => c.receivedAt))).toBeGreaterThan(windows[0]![1] - 300);
      expect(calls.length - first.length).toBeGreaterThan(0);
      // The ETA counted the closed stretch: its finish lies in the second window, as the work's did. How
      // close it comes to the last call is not a verdict: it leaves out the workers' reaction to each
      // refusal, which a loaded machine stretches (a run at load 15 finished 1,375 ms after it).
      expect(eta?.finishAt, eta?.text).toBeGreaterThanOrEqual(windows[1]![0]);
      expect(eta?.finishAt, eta?.text).toBeLessThan(windows[1]![1]);
      expect(eta?.text).toMatch(
        /^waiting for the run window \(opens \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\); done by/,
      );
      // Pacing: each token's calls follow a bucket of 4 refilled one per 100 ms (20/2s), with the
      // network's jitter (receive times, not grant times) as the only slack.
      for (const label of new Set(calls.map((c) => c.tokenLabel))) {
        const times = calls.filter((c) => c.tokenLabel === label).map((c) => c.receivedAt);
        let worst = -Infinity;
        for (let i = 0; i < times.length; i++)
          for (let j = i; j < times.length; j++)
            worst = Math.max(worst, j - i + 1 - 4 - ((times[j] ?? 0) - (times[i] ?? 0) + 30) / 100);
        expect(worst, `token ${label}: calls beyond its bucket`).toBeLessThanOrEqual(0);
      }
    },
  );
});
