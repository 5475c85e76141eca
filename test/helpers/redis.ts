// Each test file gets its own random key prefix on the real Redis and deletes it afterwards.
// No test ever runs FLUSHALL or FLUSHDB: other runs may share the server.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { deleteKeysUnder, scanKeys, type RedisClient } from '../../src/redis/client.ts';

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

export function randomPrefix(tag = 't'): string {
  return `lt-test-${tag}-${randomBytes(4).toString('hex')}`;
}

export function newRedis(url = REDIS_URL): Redis {
  const redis = new Redis(url, { maxRetriesPerRequest: null });
  // A test that restarts its own Redis sees reconnects here; ioredis retries, the test asserts.
  redis.on('error', () => {});
  return redis;
}

/** Deletes every key under a prefix (our keys and BullMQ's share it). */
export const deletePrefix = deleteKeysUnder;

/** Every key and its value under a prefix, as text, for "no token in Redis" scans. */
export function dumpPrefix(redis: RedisClient, prefix: string): Promise<string[]> {
  return dumpKeys(redis, `${prefix}:*`);
}

/**
 * Every key matching `pattern` ('*': the whole keyspace of a Redis of the test's own) and every value of
 * it, whatever its type, as text. SCAN runs its cursor to 0; a type it cannot read is named in the output
 * (`<unread TYPE>`) so that a scan for secrets cannot pass by skipping it.
 */
export async function dumpKeys(redis: RedisClient, pattern: string): Promise<string[]> {
  const out: string[] = [];
  for await (const keys of scanKeys(redis, pattern)) {
    for (const key of keys) {
      out.push(key);
      const type = await redis.type(key);
      if (type === 'string') out.push((await redis.get(key)) ?? '');
      else if (type === 'hash') out.push(...Object.entries(await redis.hgetall(key)).flat());
      else if (type === 'list') out.push(...(await redis.lrange(key, 0, -1)));
      else if (type === 'set') out.push(...(await redis.smembers(key)));
      else if (type === 'zset') out.push(...(await redis.zrange(key, 0, -1)));
      else if (type === 'stream') {
        const entries = await redis.xrange(key, '-', '+');
        for (const [id, fields] of entries) out.push(id, ...fields);
      } else if (type !== 'none') out.push(`<unread ${type}>`);
    }
  }
  return out;
}

/**
 * Counts the Redis commands `fn` costs, as Redis itself counts them (INFO commandstats), on a Redis of the
 * test's own (a shared one counts everyone's). CONFIG RESETSTAT is counted after it runs (hence - 1); the
 * INFO that reads the count, after the reading. Also the time `fn` took, for the test's own message.
 */
export async function countCommands(
  counter: Redis,
  fn: () => Promise<unknown>,
): Promise<{ commands: number; ms: number }> {
  await counter.config('RESETSTAT');
  const started = performance.now();
  await fn();
  const ms = performance.now() - started;
  const info = await counter.info('commandstats');
  let total = 0;
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) total += Number(m[2]);
  return { commands: total - 1, ms };
}
