// The HA harness itself, proven against ioredis: the run's shared Redis Cluster and Sentinel setup hold
// keys, lose their master to SIGKILL, promote a replica within the time their configuration promises,
// and the same client goes on; then the harness heals them (the killed node back as a replica) for the
// next file.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Cluster, Redis } from 'ioredis';
import { randomPrefix } from '../helpers/redis.ts';
import {
  sharedCluster,
  sharedSentinel,
  useTopologies,
  type SharedCluster,
  type SharedSentinel,
} from '../helpers/topologies.ts';

const topologies = useTopologies();
// Keys of this file only: the topologies are shared with other files.
const prefix = randomPrefix('ha-harness');

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
  let cluster: SharedCluster;
  let client: Cluster | undefined;

  beforeAll(async () => {
    cluster = await sharedCluster(topologies);
  }, 60_000);

  afterAll(async () => {
    if (client) {
      // One DEL per key: they sit in different slots.
      for (const k of await cluster.allKeys(`${prefix}:*`)) await client.del(k);
      await client.quit().catch(() => client?.disconnect());
    }
  }, 60_000);

  it('serves keys across slots and survives the SIGKILL of a master, through the same client', async () => {
    const c = cluster;
    expect(c.info.nodes).toHaveLength(6);
    for (const n of c.info.nodes) expect(n.port).toBeLessThanOrEqual(55_535);
    expect(c.info.plainSeeds.split(',')).toHaveLength(6);
    const masters = await c.masters();
    expect(masters).toHaveLength(3);

    // In plain text: the shared cluster listens on TLS ports too, for the TLS tests.
    client = new Cluster(hostPorts(c.info.plainSeeds), {
      redisOptions: { maxRetriesPerRequest: null, password: c.info.password },
    });
    client.on('error', () => {}); // the killed master's connection errors; the client recovers
    const keys = Array.from({ length: 24 }, (_, i) => `${prefix}:{k${i}}`);
    for (const k of keys) await client.set(k, `v-${k}`);

    // The keys really are spread over every master.
    const owners = new Map<string, number>();
    for (const k of keys) owners.set(k, await c.masterOf(k));
    expect(new Set(owners.values())).toEqual(new Set(masters));

    expect(await c.allKeys(`${prefix}:*`)).toEqual([...keys].sort());
    expect(await c.allKeys(`${randomPrefix('none')}:*`)).toEqual([]);

    await c.waitForReplication();
    const victimKey = keys[0]!;
    const victim = owners.get(victimKey)!;
    await c.killNode(victim);
    const { newMasterPort, ms } = await c.waitForFailover(victim, 30_000);
    expect(newMasterPort).not.toBe(victim);
    // What the configuration promises (clusterFailoverBoundMs: 3 x cluster-node-timeout to agree that
    // the master failed, 1 s of replica delay, one election within max(2 x node-timeout, 2 s), 1 s for
    // every node to learn the new config; node-timeout 1500 ms: 9.5 s).
    expect(ms, `failover of ${victim} to ${newMasterPort}`).toBeLessThanOrEqual(c.info.failoverBoundMs);

    expect(await c.masterOf(victimKey)).toBe(newMasterPort);
    const after = await c.masters();
    expect(after).toHaveLength(3);
    expect(after).not.toContain(victim);
    expect(after).toContain(newMasterPort);

    // The same client reads every key (the victim's from the promoted replica) and writes again.
    expect(await client.get(victimKey)).toBe(`v-${victimKey}`);
    for (const k of keys) expect(await client.get(k)).toBe(`v-${k}`);
    await client.set(victimKey, 'after-failover');
    const direct = new Redis({
      host: '127.0.0.1',
      port: c.plainPortOf(newMasterPort),
      password: c.info.password,
      lazyConnect: true,
    });
    try {
      await direct.connect();
      expect(await direct.get(victimKey)).toBe('after-failover');
    } finally {
      direct.disconnect();
    }
    expect(await c.allKeys(`${prefix}:*`)).toEqual([...keys].sort());

    // The next file gets the cluster as it was: the killed node back, as a replica.
    await c.heal();
    expect(await c.masters()).toEqual(after);
    expect(await client.get(victimKey)).toBe('after-failover');
  }, 90_000);
});

describe('redis-ha harness: Redis Sentinel', () => {
  let sentinel: SharedSentinel;
  let client: Redis | undefined;

  beforeAll(async () => {
    sentinel = await sharedSentinel(topologies);
  }, 60_000);

  afterAll(async () => {
    if (client) {
      const keys = await sentinel.allKeys(`${prefix}:*`);
      if (keys.length > 0) await client.del(...keys);
      await client.quit().catch(() => client?.disconnect());
    }
  }, 60_000);

  it('follows the master through a failover, through the same client', async () => {
    const s = sentinel;
    expect(s.info.masterName).toBe('ltmaster');
    expect(s.info.nodes).toHaveLength(5);
    expect(s.info.sentinels.split(',')).toHaveLength(3);
    const oldMaster = await s.masterPort();
    const replicas = await s.replicaPorts();
    expect(replicas).toHaveLength(1);
    expect(replicas).not.toContain(oldMaster);

    client = new Redis({
      sentinels: hostPorts(s.info.sentinels),
      name: s.info.masterName,
      maxRetriesPerRequest: null,
    });
    client.on('error', () => {}); // the killed master's connection errors; the client recovers
    await client.set(`${prefix}:before`, 'v1');
    expect(await client.get(`${prefix}:before`)).toBe('v1');
    expect(await serverPort(client)).toBe(oldMaster);

    await s.waitForReplication();
    const killed = await s.killMaster();
    expect(killed).toBe(oldMaster);
    const { newMasterPort, ms } = await s.waitForFailover(killed, 30_000);
    expect(newMasterPort).toBe(replicas[0]);
    // What the configuration promises (sentinelFailoverBoundMs: down-after-milliseconds, one election
    // within failover-timeout, and sentinel's fixed periods: 1 s to ask for the quorum, up to 1 s of
    // random desync, 1 s between INFOs of the promoted replica, 2 s between hello messages; with
    // down-after 1000 ms and failover-timeout 3000 ms: 9 s).
    expect(ms, `failover of ${killed} to ${newMasterPort}`).toBeLessThanOrEqual(s.info.failoverBoundMs);
    expect(await s.masterPort()).toBe(newMasterPort);

    // The same client, never recreated, writes to the promoted replica.
    await client.set(`${prefix}:after`, 'v2');
    expect(await client.get(`${prefix}:before`)).toBe('v1');
    expect(await serverPort(client)).toBe(newMasterPort);
    expect(await s.allKeys(`${prefix}:*`)).toEqual([`${prefix}:after`, `${prefix}:before`]);

    // The next file gets the setup as it was: the killed master back, as a replica of the new one.
    // Which of the two is master afterwards is the sentinels' call (down-after is 1 s: a loaded machine
    // may see one more failover while the node comes back); what the next file needs is both nodes, one
    // master and its replica.
    await s.heal();
    const master = await s.masterPort();
    expect([master, ...(await s.replicaPorts())].sort()).toEqual([killed, newMasterPort].sort());
  }, 90_000);
});
