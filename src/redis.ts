// Redis connections: a clear error when Redis does not answer at start, a warning when its eviction
// policy could drop queued jobs (BullMQ needs noeviction), and one when it keeps nothing on disk.
import { Redis } from 'ioredis';
import { LearnerTransferError } from './errors.ts';
import { isWriteRefusal } from './redis-writes.ts';
import type { Logger } from './log.ts';
import { LogThrottle } from './log-throttle.ts';

/** The URL without a password, for messages. */
export function safeRedisUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparseable REDIS_URL)';
  }
}

/**
 * A connection for BullMQ and our scripts: maxRetriesPerRequest null (BullMQ's requirement, so commands
 * wait through a Redis restart instead of failing), reconnecting with a capped backoff.
 */
export function createRedis(url: string, name = 'learner-transfer'): Redis {
  return new Redis(url, {
    maxRetriesPerRequest: null,
    enableReadyCheck: true,
    connectionName: name,
    retryStrategy: (times) => Math.min(times * 200, 5000),
  });
}

/**
 * Closes a connection: QUIT (so Redis sees a clean goodbye), but never waits more than `ms` for it. A
 * connection that is reconnecting (after a failover, say) would hold QUIT in its offline queue forever
 * and keep the process from exiting.
 */
export async function closeRedis(redis: Redis, ms = 2000): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
    timer.unref();
  });
  await Promise.race([
    redis.quit().then(
      () => {},
      () => {},
    ),
    timeout,
  ]);
  clearTimeout(timer);
  redis.disconnect();
}

/**
 * Waits until Redis answers, retrying for `timeoutMs`, then fails with a message an operator can act on
 * (not a stack trace). Warns when maxmemory-policy is not noeviction, and when Redis persists nothing.
 */
export async function connectRedis(
  url: string,
  options: { timeoutMs?: number; logger?: Logger; name?: string } = {},
): Promise<Redis> {
  const redis = createRedis(url, options.name);
  const timeoutMs = options.timeoutMs ?? 10_000;
  let lastError = '';
  const onError = (err: Error) => {
    // Say once that we are waiting, so an operator sees why nothing happens yet (ioredis retries).
    if (!lastError) {
      options.logger?.warn(
        { redis: safeRedisUrl(url), err: err.message },
        `Redis does not answer yet; retrying for up to ${Math.round(timeoutMs / 1000)} s (REDIS_CONNECT_TIMEOUT)`,
      );
    }
    lastError = err.message;
  };
  redis.on('error', onError);
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(lastError || 'timed out')), timeoutMs);
      redis.ping().then(
        () => {
          clearTimeout(timer);
          resolve();
        },
        (err: Error) => {
          clearTimeout(timer);
          // Redis answered, refusing writes (MISCONF refuses even PING): it is there. The worker's write
          // gate holds the transfers back until it takes writes again.
          const refusal = isWriteRefusal(err);
          if (refusal && refusal.cause !== 'connection') resolve();
          else reject(err);
        },
      );
    });
  } catch (err) {
    redis.disconnect();
    throw new LearnerTransferError(
      'LT_REDIS_UNREACHABLE',
      `Redis at ${safeRedisUrl(url)} did not answer within ${timeoutMs} ms (${(err as Error).message}). ` +
        `Start Redis, set REDIS_URL, or wait longer with REDIS_CONNECT_TIMEOUT.`,
      { cause: err },
    );
  }
  redis.off('error', onError);
  // Later errors (a restart mid-run) are reconnected by ioredis; log them rather than crash, and once per
  // interval rather than at every reconnection attempt.
  if (options.logger) {
    const errors = new LogThrottle(options.logger);
    redis.on('error', (err) => errors.warn({ err: err.message }, 'redis connection error'));
    redis.once('end', () => errors.stop());
  } else {
    redis.on('error', () => {});
  }
  const policy = await evictionPolicy(redis);
  if (policy !== undefined && policy !== 'noeviction') {
    options.logger?.warn(
      { maxmemoryPolicy: policy },
      `Redis maxmemory-policy is '${policy}': under memory pressure Redis may evict queued jobs and outcome ` +
        `records. Set maxmemory-policy noeviction.`,
    );
  }
  if ((await persistence(redis)) === 'none') {
    options.logger?.warn(
      { appendonly: 'no', save: '' },
      `${NO_PERSISTENCE_WARNING} (appendonly no, save ""): a Redis restart would lose the queues, the ` +
        `transfer budget log (the service's limits could then be overrun) and the audit of what each ` +
        `transfer deleted. Set appendonly yes (in redis.conf, or CONFIG SET appendonly yes and CONFIG REWRITE).`,
    );
  }
  return redis;
}

/** How the warning for a Redis without persistence begins (tests against such a Redis look for it). */
export const NO_PERSISTENCE_WARNING = 'Redis keeps nothing on disk';

/**
 * Whether Redis writes anything to disk: 'none' when AOF is off and no RDB snapshot is scheduled,
 * 'some' otherwise, undefined when CONFIG is not allowed (managed Redis, which persists on its own terms).
 */
export async function persistence(redis: Redis): Promise<'none' | 'some' | undefined> {
  try {
    const [aof, save] = await Promise.all([
      redis.config('GET', 'appendonly') as Promise<string[]>,
      redis.config('GET', 'save') as Promise<string[]>,
    ]);
    if (aof[1] === undefined || save[1] === undefined) return undefined;
    return aof[1] === 'no' && save[1].trim() === '' ? 'none' : 'some';
  } catch {
    return undefined;
  }
}

/** The eviction policy, or undefined when CONFIG is not allowed (managed Redis). */
export async function evictionPolicy(redis: Redis): Promise<string | undefined> {
  try {
    const reply = (await redis.config('GET', 'maxmemory-policy')) as string[];
    return reply[1];
  } catch {
    return undefined;
  }
}

/**
 * Deletes every key under a prefix (ours and BullMQ's share it), with SCAN and UNLINK: never KEYS, never
 * FLUSHDB. Returns how many keys it deleted.
 */
export async function deleteKeysUnder(redis: Redis, prefix: string): Promise<number> {
  let cursor = '0';
  let deleted = 0;
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) deleted += await redis.unlink(...keys);
  } while (cursor !== '0');
  return deleted;
}
