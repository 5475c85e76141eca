// Which queues have work, and when each needs a worker: one sorted set for the prefix (lane -> ms time),
// read instead of one connection per organization (decision 12; docs/many-organizations.md). Every move
// swaps only from the time read, so a producer's mark made meanwhile is never lost.
import type { RedisClient } from '../redis/client.ts';
import { QUEUE_SCRIPTS } from './scripts.ts';
import type { Keys } from '../core/keys.ts';

/** The lane of the control queue (scheduled reconciles). An org key never holds a colon. */
export const CONTROL_LANE = ':control';

export interface LaneTime {
  lane: string;
  /** ms since the epoch. */
  at: number;
  /** The score as Redis sent it: what a swap compares with. */
  raw: string;
}

export interface LaneSwap {
  lane: string;
  seen: string;
  /** The new time, or null to remove the lane (nothing left in its queue). */
  next: number | null;
}

const CHUNK = 500;

export class LanesDue {
  readonly #redis: RedisClient;
  readonly #key: string;
  readonly #channel: string;

  constructor(redis: RedisClient, keys: Keys) {
    QUEUE_SCRIPTS.define(redis);
    this.#redis = redis;
    this.#key = keys.lanesDue();
    this.#channel = keys.lanesChannel();
  }

  /** Jobs were added to these lanes: due now, and every process is nudged. */
  async markDue(lanes: Iterable<string>, at = Date.now()): Promise<void> {
    const list = [...new Set(lanes)];
    for (let i = 0; i < list.length; i += CHUNK) {
      const args = list.slice(i, i + CHUNK).flatMap((lane) => [at, lane]);
      await this.#redis.zadd(this.#key, 'LT', ...args);
    }
    if (list.length > 0) await this.#redis.publish(this.#channel, String(list.length));
  }

  /** Budget came back early (a resume, an unblock, a release): lanes that wait get an earlier time. */
  async wake(lanes: readonly string[], at = Date.now()): Promise<void> {
    if (lanes.length === 0) return;
    await this.#redis.zadd(this.#key, 'XX', 'LT', ...lanes.flatMap((lane) => [at, lane]));
  }

  /** The first `limit` lanes by time (due ones first). */
  async head(limit: number): Promise<LaneTime[]> {
    const flat = await this.#redis.zrange(this.#key, 0, limit - 1, 'WITHSCORES');
    return pairs(flat);
  }

  /** The times of these lanes (undefined: not in the set). */
  async timesOf(lanes: readonly string[]): Promise<(LaneTime | undefined)[]> {
    const out: (LaneTime | undefined)[] = [];
    for (let i = 0; i < lanes.length; i += CHUNK) {
      const chunk = lanes.slice(i, i + CHUNK);
      const scores = await this.#redis.zmscore(this.#key, ...chunk);
      chunk.forEach((lane, j) => {
        const raw = scores[j];
        out.push(raw === null || raw === undefined ? undefined : { lane, at: Number(raw), raw: String(raw) });
      });
    }
    return out;
  }

  /** Each lane moved to its new time only if its time is still the one seen; true where it was. */
  async swap(swaps: readonly LaneSwap[]): Promise<boolean[]> {
    const out: boolean[] = [];
    for (let i = 0; i < swaps.length; i += CHUNK) {
      const args = swaps
        .slice(i, i + CHUNK)
        .flatMap((s) => [s.lane, s.seen, s.next === null ? '' : String(Math.ceil(s.next))]);
      const reply = (await QUEUE_SCRIPTS.run(this.#redis, 'take-lanes', [this.#key], args)) as number[];
      for (const r of reply) out.push(Number(r) === 1);
    }
    return out;
  }

  get channel(): string {
    return this.#channel;
  }
}

function pairs(flat: readonly string[]): LaneTime[] {
  const out: LaneTime[] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const lane = flat[i] as string;
    const raw = flat[i + 1] as string;
    out.push({ lane, at: Number(raw), raw });
  }
  return out;
}
