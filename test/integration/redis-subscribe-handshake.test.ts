// A subscriber whose SUBSCRIBE is sent while its connection is between connect and ready (the window
// the lanes' subscriber can hit: `work` creates it, then boots on its other connection before it
// subscribes). ioredis writes SUBSCRIBE at once there, before its ready check's INFO, which then fails in
// subscriber mode: the connection is dropped and comes back without the subscription, deaf to every
// nudge (redis/ioredis#2037). subscribeReady (src/redis/client.ts) waits out that window.
import type { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { createRedis, subscribeReady } from '../../src/redis/client.ts';
import { standaloneTarget } from '../../src/core/redis-target.ts';
import { newRedis, randomPrefix, REDIS_URL } from '../helpers/redis.ts';
import { waitFor } from '../helpers/wait.ts';

const open: Redis[] = [];
afterEach(() => {
  for (const r of open.splice(0)) r.disconnect();
});

describe('subscribing while the connection shakes hands', () => {
  it('a SUBSCRIBE sent at connect, after subscribeReady, keeps its subscription and raises no error', async () => {
    const channel = `${randomPrefix('sub')}:nudge`;
    const sub = createRedis(standaloneTarget(REDIS_URL), 'lt-test-subscribe-handshake') as Redis;
    const pub = newRedis();
    open.push(sub, pub);
    const errors: string[] = [];
    const heard: string[] = [];
    const seen: string[] = [];
    sub.on('error', (e: Error) => errors.push(e.message));
    sub.on('message', (_channel: string, m: string) => heard.push(m));
    for (const event of ['connect', 'ready', 'close']) sub.on(event, () => seen.push(event));
    const subscribed = new Promise<void>((resolve, reject) => {
      sub.once('connect', () => {
        // In the window: connected, not ready.
        expect(sub.status).toBe('connect');
        subscribeReady(sub)
          .then(() => sub.subscribe(channel))
          .then(() => resolve(), reject);
      });
    });
    await subscribed;
    await waitFor(
      'the nudge to be heard',
      async () => {
        await pub.publish(channel, 'nudge');
        return heard.length;
      },
      (n) => n > 0,
      { everyMs: 100, timeoutMs: 10_000 },
    );
    expect(errors).toEqual([]);
    // One connection, never dropped: the ready check passed.
    expect(seen).toEqual(['connect', 'ready']);
  });
});
