// Tests run against a real Redis. When it does not answer, the whole run fails here, loudly, instead of
// tests skipping themselves into a green run that proved nothing.
import { Redis } from 'ioredis';
import { buildTestCli } from './cli-build.ts';

export default async function setup(): Promise<void> {
  const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
  try {
    await redis.connect();
    const pong = await redis.ping();
    if (pong !== 'PONG') throw new Error(`unexpected PING answer ${pong}`);
  } catch (err) {
    throw new Error(
      `The tests need a real Redis at ${url} (set REDIS_URL, or start one: redis-server --daemonize yes). ` +
        `Connecting failed: ${(err as Error).message}`,
    );
  } finally {
    redis.disconnect();
  }
  // The CLI the tests spawn, compiled once (cli-build.ts); the workers inherit the variable, spawnCli reads it.
  process.env.LT_TEST_CLI = await buildTestCli();
}
