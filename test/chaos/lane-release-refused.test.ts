// A lane let go while Redis refuses writes: its release (LanesDue's swap) is refused, and the lane comes
// back once Redis takes writes again, not when this process's lease on it ends (fault seed 18: Redis full
// for 3 s just as a spent organization was let go left it with no worker for 13 s). On a redis-server of
// the test's own, made to refuse writes (maxmemory below what it uses) at the moment the release is sent.
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Keys } from '../../src/core/keys.ts';
import { LanesDue, type LaneSwap } from '../../src/queue/lanes-due.ts';
import type { RedisClient } from '../../src/redis/client.ts';
import type { LaneEvent } from '../../src/worker/lanes.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';
import { newRedis } from '../helpers/redis.ts';
import { startOwnRedis, type OwnRedis } from '../helpers/redis-server.ts';

/** The lane lease of the `work` under test: a release left undone would hold the lane this long. */
const LEASE_MS = 20_000;
/** How long Redis refuses writes from the first release on. */
const REFUSAL_MS = 300;

/** LanesDue whose first release (a swap to a time before the lease's) meets a Redis that refuses writes. */
class RefusedOnce extends LanesDue {
  refusedAt: number | undefined;
  liftedAt: number | undefined;
  lifted: Promise<void> = Promise.resolve();
  readonly #admin: Redis;

  constructor(redis: RedisClient, keys: Keys, admin: Redis) {
    super(redis, keys);
    this.#admin = admin;
  }

  override async swap(swaps: readonly LaneSwap[]): Promise<boolean[]> {
    const release = swaps.some((s) => s.next === null || s.next < Date.now() + LEASE_MS / 2);
    if (release && this.refusedAt === undefined) {
      this.refusedAt = Date.now();
      await this.#admin.config('SET', 'maxmemory', '1');
      this.lifted = new Promise<void>((resolve) => setTimeout(resolve, REFUSAL_MS))
        .then(() => this.#admin.config('SET', 'maxmemory', '0'))
        .then(() => void (this.liftedAt = Date.now()));
    }
    return super.swap(swaps);
  }
}

describe('a lane whose release Redis refused', () => {
  let own: OwnRedis;
  let admin: Redis;
  let h: Harness;
  beforeAll(async () => {
    own = await startOwnRedis(['--maxmemory-policy', 'noeviction']);
    admin = newRedis(own.url);
    // 3 permits per 4 s for the organization: 7 learners take three windows, and each wait for the next
    // permit is long enough (over 1 s) that the lane is let go for it, not slept through attached.
    h = await startHarness({
      tag: 'release-refused',
      redisUrl: own.url,
      env: { LEARNER_API_TOKENS: 'acme:sim-acme-1', LIMIT_PER_TOKEN: '3/4s', LIMIT_PER_ORG: '3/4s' },
    });
  });
  afterAll(async () => {
    await h?.close();
    admin?.disconnect();
    await own?.close();
  });

  it('is released once Redis takes writes again and taken back when its budget frees, not at its lease', async () => {
    await h.enqueueIds(learnersNotIn('acme', 7));
    const due = new RefusedOnce(h.ctx.redis, h.ctx.keys, admin);
    const events: (LaneEvent & { t: number })[] = [];
    const result = await h.workUntilIdle({
      concurrency: 3,
      lanes: { due, leaseMs: LEASE_MS, onChange: (e) => events.push({ ...e, t: Date.now() }) },
    });
    await due.lifted;
    expect(result).toMatchObject({ reason: 'idle', succeeded: 7, failed: 0 });
    expect(due.refusedAt).toBeDefined();
    expect(due.liftedAt).toBeDefined();
    // The lane let go for budget when the refusal fell is attached again as soon as both its budget is
    // back and Redis takes writes (a retry every 500 ms): left under its lease it would wait the lease out.
    const refusedAt = due.refusedAt as number;
    const letGo = events.filter((e) => e.kind === 'detach' && e.t >= refusedAt)[0];
    expect(letGo?.reason).toBe('budget');
    const back = events.find((e) => e.kind === 'attach' && e.t > (letGo?.t ?? Infinity));
    expect(back).toBeDefined();
    const ready = Math.max(due.liftedAt as number, (letGo?.dueAt as number) ?? 0);
    expect((back?.t as number) - ready).toBeLessThan(2_000);
    expect((back?.t as number) - refusedAt).toBeLessThan(LEASE_MS / 2);
    expect(h.sim.record.filter((r) => r.status === 429)).toEqual([]);
    expect(h.sim.violations()).toEqual([]);
    // The release was refused: Redis said so, and the log says it (a limiter event may move the lane's time
    // before the retry lands, so the retry's own line is not required).
    expect(h.logLines.some((l) => l.includes('could not release a lane') && l.includes('OOM'))).toBe(true);
  });
});
