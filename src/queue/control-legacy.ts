// Whether the control queue of releases before cluster support (`control`, no hash tag) holds anything
// to move (queue/control-upgrade.ts). Read with Redis alone, so that a start with nothing to move (every
// start after the first) loads no BullMQ for it.
import type { Keys } from '../core/keys.ts';
import { isCluster, type RedisClient } from '../redis/client.ts';

/**
 * True when the old queue has schedules (`repeat`) or jobs due now (`wait`/`prioritized`). A cluster
 * never had it (nothing could connect to one before).
 */
export async function hasLegacyControlQueue(redis: RedisClient, keys: Keys): Promise<boolean> {
  if (isCluster(redis)) return false;
  const legacyKey = (suffix: string) => keys.queueKey(keys.legacyControlQueueName(), suffix);
  return (await redis.exists(legacyKey('repeat'), legacyKey('wait'), legacyKey('prioritized'))) > 0;
}
