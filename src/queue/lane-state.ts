// What is left in a lane's BullMQ queue, read for many lanes in one pipeline (one round trip, however
// many organizations): whether it has jobs to take now, jobs active, and when its first delayed job is due.
import type { RedisClient } from '../redis/client.ts';
import type { Keys } from '../core/keys.ts';
import { CONTROL_LANE } from './lanes-due.ts';
import { readBatched } from '../redis/batch.ts';

export interface LaneJobs {
  lane: string;
  /** Jobs waiting or prioritized: to take now. */
  ready: number;
  active: number;
  delayed: number;
  /** The first delayed job's time (ms), if any. */
  firstDelayed: number | undefined;
}

/** BullMQ scores a delayed job `timestamp * 0x1000 + counter`. */
const DELAY_FACTOR = 0x1000;

export function laneQueueName(keys: Keys, lane: string): string {
  return lane === CONTROL_LANE ? keys.controlQueueName() : keys.queueName(lane);
}

export function hasJobs(j: LaneJobs): boolean {
  return j.ready + j.active + j.delayed > 0;
}

/**
 * The jobs of each lane, read in one pipeline per Redis node (a lane's keys share its hash tag; a Cluster
 * pipeline must stay on one node: redis/batch.ts groups them).
 */
export async function laneJobs(
  redis: RedisClient,
  keys: Keys,
  lanes: readonly string[],
): Promise<LaneJobs[]> {
  return readBatched(
    redis,
    lanes.map((lane) => {
      const q = laneQueueName(keys, lane);
      return {
        slotKey: keys.queueKey(q, 'wait'),
        add(pipe) {
          pipe.llen(keys.queueKey(q, 'wait'));
          pipe.zcard(keys.queueKey(q, 'prioritized'));
          pipe.llen(keys.queueKey(q, 'active'));
          pipe.zcard(keys.queueKey(q, 'delayed'));
          pipe.zrange(keys.queueKey(q, 'delayed'), 0, 0, 'WITHSCORES');
        },
        read(r): LaneJobs {
          const num = (k: number) => Number(r[k] ?? 0);
          const first = r[4] as string[] | undefined;
          const score = first && first.length >= 2 ? Number(first[1]) : undefined;
          return {
            lane,
            ready: num(0) + num(1),
            active: num(2),
            delayed: num(3),
            firstDelayed: score === undefined ? undefined : Math.floor(score / DELAY_FACTOR),
          };
        },
      };
    }),
  );
}
