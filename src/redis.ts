// Redis connections: a clear error when Redis does not answer at start, and a warning when its eviction
// policy could drop queued jobs (BullMQ needs noeviction).
import { Redis } from 'ioredis';
import { LearnerTransferError } from './errors.ts';
import type { Logger } from './log.ts';

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
 * Waits until Redis answers, retrying for `timeoutMs`, then fails with a message an operator can act on
 * (not a stack trace). Warns when maxmemory-policy is not noeviction.
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
          reject(err);
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
  // Later errors (a restart mid-run) are reconnected by ioredis; log them rather than crash.
  redis.on('error', (err) => options.logger?.warn({ err: err.message }, 'redis connection error'));
  const policy = await evictionPolicy(redis);
  if (policy !== undefined && policy !== 'noeviction') {
    options.logger?.warn(
      { maxmemoryPolicy: policy },
      `Redis maxmemory-policy is '${policy}': under memory pressure Redis may evict queued jobs and outcome ` +
        `records. Set maxmemory-policy noeviction.`,
    );
  }
  return redis;
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
