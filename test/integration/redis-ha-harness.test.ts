// The HA harness itself, proven against ioredis: a real local Redis Cluster and a real Sentinel setup come
// up, hold keys, lose their master to SIGKILL, promote a replica, and the same client goes on.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Cluster, Redis } from 'ioredis';
import {
  startCluster,
  startSentinel,
  type RedisClusterHandle,
  type RedisSentinelHandle,
} from '../helpers/redis-ha.ts';

function hostPorts(list: string): { host: string; port: number }[] {
  return list.split(',').map((hp) => {
    const [host, port] = hp.split(':');
    return { host: host as string, port: Number(port) };
  });
}

/** The port of the server a connection is really talking to. */
async function serverPort(r: Redis): Promise<number> {
  const text = await r.info('server');
  return Number(/tcp_port:(\d+)/.exec(text)?.[1]);
}

describe('redis-ha harness: Redis Cluster', () => {
  let cluster: RedisClusterHandle | undefined;
  let client: Cluster | undefined;

  beforeAll(async () => {
    cluster = await startCluster();
    console.log(`[redis-ha] cluster of ${cluster.nodes.length} nodes up in ${cluster.setupMs} ms`);
  }, 60_000);

  afterAll(async () => {
    await client?.quit().catch(() => client?.disconnect());
    const pids = cluster?.nodes.map((n) => n.pid) ?? [];
    await cluster?.stop();
    // Every process it started is gone.
    for (const pid of pids) expect(() => process.kill(pid, 0)).toThrow();
  }, 60_000);

  it('serves keys across slots and survives the SIGKILL of a master, through the same client', async () => {
    const c = cluster!;
    expect(c.nodes).toHaveLength(6);
    for (const n of c.nodes) expect(n.port).toBeLessThanOrEqual(55_535);
    expect(c.seeds.split(',')).toHaveLength(6);
    const masters = await c.masters();
    expect(masters).toHaveLength(3);

    client = new Cluster(hostPorts(c.seeds), { redisOptions: { maxRetriesPerRequest: null } });
    client.on('error', () => {}); // the killed master's connection errors; the client recovers
    const keys = Array.from({ length: 24 }, (_, i) => `lt-ha-harness:{k${i}}`);
    for (const k of keys) await client.set(k, `v-${k}`);

    // The keys really are spread over every master.
    const owners = new Map<string, number>();
    for (const k of keys) owners.set(k, await c.masterOf(k));
    expect(new Set(owners.values())).toEqual(new Set(masters));

    expect(await c.allKeys('lt-ha-harness:*')).toEqual([...keys].sort());
    expect(await c.allKeys('no-such-prefix:*')).toEqual([]);

    await c.waitForReplication();
    const victimKey = keys[0]!;
    const victim = owners.get(victimKey)!;
    await c.killNode(victim);
    const { newMasterPort, ms } = await c.waitForFailover(victim, 30_000);
    console.log(`[redis-ha] cluster failover: master ${victim} -> ${newMasterPort} in ${ms} ms`);
    expect(newMasterPort).not.toBe(victim);
    expect(ms).toBeGreaterThan(0);
    expect(ms).toBeLessThan(30_000);

    expect(await c.masterOf(victimKey)).toBe(newMasterPort);
    const after = await c.masters();
    expect(after).toHaveLength(3);
    expect(after).not.toContain(victim);
    expect(after).toContain(newMasterPort);

    // The same client reads every key (the victim's from the promoted replica) and writes again.
    expect(await client.get(victimKey)).toBe(`v-${victimKey}`);
    for (const k of keys) expect(await client.get(k)).toBe(`v-${k}`);
    await client.set(victimKey, 'after-failover');
    const direct = new Redis({ host: '127.0.0.1', port: newMasterPort, lazyConnect: true });
    try {
      await direct.connect();
      expect(await direct.get(victimKey)).toBe('after-failover');
    } finally {
      direct.disconnect();
    }
    expect(await c.allKeys('lt-ha-harness:*')).toEqual([...keys].sort());
  });
});

describe('redis-ha harness: Redis Sentinel', () => {
  let sentinel: RedisSentinelHandle | undefined;
  let client: Redis | undefined;

  beforeAll(async () => {
    sentinel = await startSentinel();
    console.log(`[redis-ha] sentinel setup (1 master, 1 replica, 3 sentinels) up in ${sentinel.setupMs} ms`);
  }, 60_000);

  afterAll(async () => {
    await client?.quit().catch(() => client?.disconnect());
    const pids = sentinel?.nodes.map((n) => n.pid) ?? [];
    await sentinel?.stop();
    for (const pid of pids) expect(() => process.kill(pid, 0)).toThrow();
  }, 60_000);

  it('follows the master through a failover, through the same client', async () => {
    const s = sentinel!;
    expect(s.masterName).toBe('ltmaster');
    expect(s.nodes).toHaveLength(5);
    expect(s.sentinels.split(',')).toHaveLength(3);
    const oldMaster = await s.masterPort();
    const replicas = await s.replicaPorts();
    expect(replicas).toHaveLength(1);
    expect(replicas).not.toContain(oldMaster);

    client = new Redis({ sentinels: hostPorts(s.sentinels), name: s.masterName, maxRetriesPerRequest: null });
    client.on('error', () => {}); // the killed master's connection errors; the client recovers
    await client.set('lt-ha-sentinel:before', 'v1');
    expect(await client.get('lt-ha-sentinel:before')).toBe('v1');
    expect(await serverPort(client)).toBe(oldMaster);

    await s.waitForReplication();
    const killed = await s.killMaster();
    expect(killed).toBe(oldMaster);
    const { newMasterPort, ms } = await s.waitForFailover(killed, 30_000);
    console.log(`[redis-ha] sentinel failover: master ${killed} -> ${newMasterPort} in ${ms} ms`);
    expect(newMasterPort).toBe(replicas[0]);
    expect(ms).toBeGreaterThan(0);
    expect(ms).toBeLessThan(30_000);
    expect(await s.masterPort()).toBe(newMasterPort);

    // The same client, never recreated, writes to the promoted replica.
    await client.set('lt-ha-sentinel:after', 'v2');
    expect(await client.get('lt-ha-sentinel:before')).toBe('v1');
    expect(await serverPort(client)).toBe(newMasterPort);
    expect(await s.allKeys('lt-ha-sentinel:*')).toEqual(['lt-ha-sentinel:after', 'lt-ha-sentinel:before']);
  });
});
