// Which Redis the environment selects, and how a bad value is reported: the variable and the value, never
// a password.
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/core/config.ts';
import { describeRedis } from '../../src/core/redis-target.ts';

function problemsOf(env: Record<string, string>): string {
  try {
    loadConfig(env);
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error('expected a configuration error');
}

describe('Redis target', () => {
  it('is REDIS_URL by default', () => {
    const c = loadConfig({ REDIS_URL: 'redis://10.0.0.5:6380' });
    expect(c.redis).toMatchObject({ mode: 'standalone', url: 'redis://10.0.0.5:6380' });
  });

  it('is a cluster with REDIS_CLUSTER_NODES, which wins over REDIS_URL', () => {
    const c = loadConfig({
      REDIS_URL: 'redis://10.0.0.5:6380',
      REDIS_CLUSTER_NODES: ' 10.0.0.1:7000, redis-b:7001,[::1]:7002 ',
      REDIS_USERNAME: 'lt',
      REDIS_PASSWORD: 'cluster-secret-pw',
      REDIS_TLS: 'true',
    });
    expect(c.redis).toMatchObject({
      mode: 'cluster',
      nodes: [
        { host: '10.0.0.1', port: 7000 },
        { host: 'redis-b', port: 7001 },
        { host: '::1', port: 7002 },
      ],
      username: 'lt',
      tls: true,
    });
    expect(c.redis.password).toBe('cluster-secret-pw');
    // The password is there for the connection, and nowhere a log or a message could take it from.
    expect(JSON.stringify(c)).not.toContain('cluster-secret-pw');
    expect(describeRedis(c.redis)).toBe(
      'Redis Cluster (REDIS_CLUSTER_NODES 10.0.0.1:7000,redis-b:7001,[::1]:7002) over TLS',
    );
  });

  it('is Sentinel with REDIS_SENTINELS and REDIS_SENTINEL_MASTER', () => {
    const c = loadConfig({
      REDIS_SENTINELS: 's1:26379,s2:26379',
      REDIS_SENTINEL_MASTER: 'ltmaster',
      REDIS_PASSWORD: 'data-pw-123',
      REDIS_SENTINEL_PASSWORD: 'sentinel-pw-456',
    });
    expect(c.redis).toMatchObject({
      mode: 'sentinel',
      masterName: 'ltmaster',
      sentinels: [
        { host: 's1', port: 26379 },
        { host: 's2', port: 26379 },
      ],
    });
    expect(c.redis.mode === 'sentinel' && c.redis.sentinelPassword).toBe('sentinel-pw-456');
    const text = JSON.stringify(c) + describeRedis(c.redis);
    expect(text).not.toContain('data-pw-123');
    expect(text).not.toContain('sentinel-pw-456');
  });

  it('names the variable and the bad value', () => {
    expect(problemsOf({ REDIS_CLUSTER_NODES: '10.0.0.1:7000,10.0.0.2' })).toContain(
      "REDIS_CLUSTER_NODES: got '10.0.0.1:7000,10.0.0.2': expected host:port[,host:port...] (entry '10.0.0.2' is not host:port)",
    );
    expect(problemsOf({ REDIS_CLUSTER_NODES: 'a:70000' })).toContain("entry 'a:70000' is not host:port");
    expect(problemsOf({ REDIS_SENTINELS: 's1:26379' })).toContain(
      'REDIS_SENTINEL_MASTER: required with REDIS_SENTINELS',
    );
    expect(problemsOf({ REDIS_SENTINEL_MASTER: 'm' })).toContain(
      'REDIS_SENTINELS: required with REDIS_SENTINEL_MASTER',
    );
    expect(problemsOf({ REDIS_SENTINELS: 's1:26379', REDIS_SENTINEL_MASTER: 'bad name' })).toContain(
      "REDIS_SENTINEL_MASTER: expected the master's name as the sentinels know it (letters, digits, _ . -), got 'bad name'",
    );
    expect(
      problemsOf({ REDIS_CLUSTER_NODES: 'a:1', REDIS_SENTINELS: 's:2', REDIS_SENTINEL_MASTER: 'm' }),
    ).toContain('REDIS_CLUSTER_NODES, REDIS_SENTINELS: set one of them');
    expect(problemsOf({ REDIS_TLS: 'maybe' })).toContain("REDIS_TLS: expected true or false, got 'maybe'");
    expect(problemsOf({ REDIS_WAIT_TIMEOUT: 'soon' })).toContain('REDIS_WAIT_TIMEOUT: expected a duration');
    // The README's way to turn the wait off, and the other timeouts that have no "off".
    expect(loadConfig({ REDIS_WAIT_TIMEOUT: '0' }).redisWaitTimeoutMs).toBe(0);
    expect(problemsOf({ REQUEST_TIMEOUT: '0' })).toContain('REQUEST_TIMEOUT: expected a duration');
    expect(problemsOf({ REQUEST_TIMEOUT: '0.4ms' })).toContain('REQUEST_TIMEOUT: expected a duration');
  });

  it('never shows a value that holds credentials', () => {
    const message = problemsOf({ REDIS_CLUSTER_NODES: 'user:hunter2pass@10.0.0.1:7000' });
    expect(message).toContain(
      'REDIS_CLUSTER_NODES (the value is not shown: it looks like it holds credentials',
    );
    expect(message).not.toContain('hunter2pass');
    const url = problemsOf({ REDIS_URL: 'http://:hunter3pass@10.0.0.1:6379' });
    expect(url).toContain('REDIS_URL');
    expect(url).not.toContain('hunter3pass');
  });
});
