// The probes of a worker's metrics port, as the kubelet uses them (deploy/kubernetes): the real CLI
// `work --metrics-host 0.0.0.0` with DASHBOARD_TOKEN, on a redis-server of the test's own. /healthz and
// /readyz answer without the token and to any Host name (the kubelet probes the pod's address), /metrics
// still asks for the token; /readyz is 503 while Redis refuses writes, while the worker's write gate is
// shut (here: above the high-water mark, where the dashboard's /readyz still says ready) and while Redis
// is gone, and /healthz stays 200 through all of it.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { READY_PROBE_INTERVAL_MS } from '../../src/ops/metrics/health.ts';
import { spawnCli, waitExit } from '../helpers/cli.ts';
import { newRedis, randomPrefix } from '../helpers/redis.ts';
import { freePort, startOwnRedis, type OwnRedis } from '../helpers/redis-server.ts';
import { waitFor } from '../helpers/wait.ts';

const TOKEN = 'probe-metrics-token-5f2c9a71e8';
let own: OwnRedis;
let r: Redis;

beforeAll(async () => {
  own = await startOwnRedis(['--appendonly', 'no']);
  r = newRedis(own.url);
});
afterAll(async () => {
  r?.disconnect();
  await own?.close();
});

interface Answer {
  status: number;
  body: string;
}

async function get(port: number, path: string, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await request(`http://127.0.0.1:${port}${path}`, {
    headers: { host: `10.1.2.3:${port}`, ...headers },
  });
  return { status: res.statusCode, body: await res.body.text() };
}

/** A worker serving its metrics port beyond loopback, as in the StatefulSet. */
async function startWorker(env: Record<string, string> = {}) {
  const port = await freePort();
  const child = spawnCli(['work', '--metrics-port', String(port), '--metrics-host', '0.0.0.0'], {
    REDIS_URL: own.url,
    QUEUE_PREFIX: randomPrefix('probes'),
    // Nothing is enqueued: the worker never calls the service.
    LEARNER_API_BASE_URL: 'http://127.0.0.1:9',
    LEARNER_API_TOKENS: 'acme:probe-tok-1',
    DASHBOARD_TOKEN: TOKEN,
    LOG_LEVEL: 'info',
    ...env,
  });
  const exit = waitExit(child, 60_000);
  await waitFor(
    "'workers started' on the worker's stderr (or its exit)",
    () => child.output.stderr.includes('workers started') || child.exitCode !== null,
    (up) => up,
    { everyMs: 100, show: () => `stderr ${child.output.stderr.slice(-1000)}` },
  );
  expect(child.exitCode, child.output.stderr).toBeNull();
  return {
    port,
    stop: async () => {
      child.kill('SIGTERM');
      return exit;
    },
  };
}

const readyz = (port: number) => get(port, '/readyz');

describe('work --metrics-port: the probes the kubelet uses', () => {
  it('serves /healthz and /readyz open to any Host, /metrics only with the token; 503 while Redis refuses writes or is gone', async () => {
    const w = await startWorker();
    try {
      const health = await get(w.port, '/healthz');
      expect(health).toEqual({ status: 200, body: 'ok\n' });
      const ready = await readyz(w.port);
      expect(ready.status, ready.body).toBe(200);
      expect(JSON.parse(ready.body)).toEqual({ status: 'ready', redis: 'ok' });
      // The token still guards the metrics, and the Host rule applies to them as before.
      expect((await get(w.port, '/metrics')).status).toBe(401);
      const metrics = await get(w.port, '/metrics', { authorization: `Bearer ${TOKEN}` });
      expect(metrics.status).toBe(200);
      expect(metrics.body).toContain('lt_transfer_request_duration_seconds');

      // Redis answers PING but refuses writes: not ready, with the cause's code and no Redis text.
      await r.config('SET', 'min-replicas-to-write', '1');
      const refused = await waitFor(
        '/readyz to answer 503 while Redis refuses writes',
        () => readyz(w.port),
        (a) => a.status === 503,
        { everyMs: 200, timeoutMs: 15_000 },
      );
      expect(JSON.parse(refused.body).status).toBe('unavailable');
      expect(refused.body).toMatch(/NOREPLICAS/);
      expect(refused.body).not.toContain(String(own.port));
      expect((await get(w.port, '/healthz')).status).toBe(200);
      await r.config('SET', 'min-replicas-to-write', '0');
      await waitFor(
        '/readyz ready again',
        () => readyz(w.port),
        (a) => a.status === 200,
        {
          everyMs: 200,
          timeoutMs: 15_000,
        },
      );

      // Redis gone: not ready, still alive (a restart would not bring Redis back).
      await own.stop();
      const gone = await waitFor(
        '/readyz 503 with Redis gone',
        () => readyz(w.port),
        (a) => a.status === 503,
        {
          everyMs: 200,
          timeoutMs: 15_000,
        },
      );
      expect(JSON.parse(gone.body).status).toBe('unavailable');
      expect((await get(w.port, '/healthz')).status).toBe(200);
      await own.start();
      await waitFor(
        '/readyz ready after Redis is back',
        () => readyz(w.port),
        (a) => a.status === 200,
        {
          everyMs: 250,
          timeoutMs: 30_000,
        },
      );
    } finally {
      await r.config('SET', 'min-replicas-to-write', '0').catch(() => undefined);
      const result = await w.stop();
      expect(result.stderr).not.toContain(TOKEN);
    }
  }, 90_000);

  it('is not ready while its write gate is shut, even where Redis still takes writes (above the high-water mark)', async () => {
    // A mark of 1% under a maxmemory Redis is far above: writes pass, the gate holds the worker back.
    const used = Number(/^used_memory:(\d+)/m.exec(await r.info('memory'))?.[1]);
    await r.config('SET', 'maxmemory', String(used * 4));
    const w = await startWorker({ REDIS_HIGH_WATER: '1%' });
    try {
      const shut = await waitFor(
        '/readyz 503 with the gate shut',
        () => readyz(w.port),
        (a) => a.status === 503,
        { everyMs: 200, timeoutMs: 15_000 },
      );
      expect(JSON.parse(shut.body)).toEqual({ status: 'unavailable', redis: 'write gate shut (high-water)' });
      // The mark lifted: the gate opens at its next check (every 400 ms while shut), and the worker is ready.
      await r.config('SET', 'maxmemory', '0');
      await sleep(READY_PROBE_INTERVAL_MS);
      const open = await waitFor(
        '/readyz ready once the gate opens',
        () => readyz(w.port),
        (a) => a.status === 200,
        {
          everyMs: 200,
          timeoutMs: 15_000,
        },
      );
      expect(JSON.parse(open.body)).toEqual({ status: 'ready', redis: 'ok' });
    } finally {
      await r.config('SET', 'maxmemory', '0');
      await w.stop();
    }
  }, 60_000);
});
