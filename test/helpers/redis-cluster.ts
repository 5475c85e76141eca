// A Redis Cluster for tests (3 masters + 3 replicas by default), started from the redis-server binary on
// free ports <= 55535 (a node's bus listens on port + 10000), killed and restarted node by node.
import { join } from 'node:path';
import { accessFor, clusterFailoverBoundMs, dataNodeArgs } from './redis-ha-access.ts';
import {
  HOST,
  UP_TIMEOUT_MS,
  command,
  info,
  isAlive,
  killProc,
  parseInfo,
  relaunch,
  replicasCaughtUp,
  runRedisCli,
  scanAll,
  spawnRedis,
  stopAll,
  tail,
  topologyDir,
  waitFor,
  type Proc,
} from './redis-ha-procs.ts';
import type {
  FailoverResult,
  HaNode,
  NodeAccess,
  RedisClusterHandle,
  RedisClusterOptions,
  TlsFiles,
} from './redis-ha-types.ts';

interface ClusterNodeLine {
  id: string;
  port: number;
  flags: string[];
  masterId: string;
  slots: [number, number][];
}

function parseClusterNodes(text: string): ClusterNodeLine[] {
  const out: ClusterNodeLine[] = [];
  for (const line of text.split('\n')) {
    const parts = line.trim().split(' ');
    if (parts.length < 8) continue;
    const [id, addr, flags, masterId] = parts as [string, string, string, string];
    const port = Number(/:(\d+)@/.exec(addr)?.[1] ?? NaN);
    const slots: [number, number][] = [];
    for (const s of parts.slice(8)) {
      if (s.startsWith('[')) continue; // a slot being imported or migrated
      const [a, b] = s.split('-');
      slots.push([Number(a), Number(b ?? a)]);
    }
    out.push({ id, port, flags: flags.split(','), masterId, slots });
  }
  return out;
}

function ownsSlot(n: ClusterNodeLine, slot: number): boolean {
  return n.slots.some(([a, b]) => slot >= a && slot <= b);
}

export async function startCluster(opts: RedisClusterOptions = {}): Promise<RedisClusterHandle> {
  const cluster = new RedisCluster(opts);
  await cluster.start();
  return cluster;
}

class RedisCluster implements RedisClusterHandle {
  seeds = '';
  plainSeeds: string | undefined;
  readonly nodeTimeoutMs: number;
  readonly failoverBoundMs: number;
  readonly dir: string;
  setupMs = 0;
  password: string | undefined;
  tls: TlsFiles | undefined;
  private readonly startedAt = Date.now();
  private readonly masterCount: number;
  private readonly replicasPerMaster: number;
  private readonly procs = new Map<number, Proc>();
  private access: NodeAccess = {};
  /** Slots each killed master served at the moment of its death. */
  private readonly slotsAtDeath = new Map<number, [number, number][]>();

  constructor(private readonly opts: RedisClusterOptions) {
    this.masterCount = opts.masters ?? 3;
    this.replicasPerMaster = opts.replicasPerMaster ?? 1;
    this.nodeTimeoutMs = opts.nodeTimeoutMs ?? 1500;
    this.failoverBoundMs = clusterFailoverBoundMs(this.nodeTimeoutMs);
    if (this.masterCount < 3) {
      throw new Error(`startCluster: redis-cli needs at least 3 masters, got ${this.masterCount}`);
    }
    this.dir = topologyDir('cluster');
  }

  get nodes(): HaNode[] {
    return [...this.procs.values()].map((p) => ({ port: p.port, plainPort: p.plainPort, pid: p.pid }));
  }

  private get total(): number {
    return this.masterCount * (1 + this.replicasPerMaster);
  }

  private allLogs = () => [...this.procs.values()].map((p) => tail(p, 800)).join('\n');

  private live(): Proc[] {
    return [...this.procs.values()].filter(isAlive);
  }

  /** Every node started, the cluster created over them, healthy; on any failure, everything stopped. */
  async start(): Promise<void> {
    try {
      this.access = accessFor(this.opts, this.dir);
      const started = await Promise.all(Array.from({ length: this.total }, () => this.spawnNode()));
      await this.create(started.map((p) => p.port));
      await this.waitHealthy(UP_TIMEOUT_MS);
    } catch (err) {
      await this.stop();
      throw err;
    }
    this.seeds = [...this.procs.keys()].map((p) => `${HOST}:${p}`).join(',');
    if (this.access.tls && this.access.plainToo) {
      this.plainSeeds = [...this.procs.values()].map((p) => `${HOST}:${p.plainPort}`).join(',');
    }
    this.password = this.access.password;
    this.tls = this.access.tls;
    this.setupMs = Date.now() - this.startedAt;
  }

  private async spawnNode(): Promise<Proc> {
    const p = await spawnRedis(
      this.dir,
      true,
      (port, logFile, plainPort) => [
        ...dataNodeArgs(this.access, port, true, this.dir, logFile, plainPort),
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        join(this.dir, `nodes-${port}.conf`),
        '--cluster-node-timeout',
        String(this.nodeTimeoutMs),
        // 0: a replica fails over however long it has been disconnected from its master.
        '--cluster-replica-validity-factor',
        '0',
        '--cluster-allow-reads-when-down',
        'no',
      ],
      'a cluster node',
      this.access,
    );
    this.procs.set(p.port, p);
    return p;
  }

  private async create(ports: number[]): Promise<void> {
    const args = ['--cluster', 'create', ...ports.map((p) => `${HOST}:${p}`)];
    args.push('--cluster-replicas', String(this.replicasPerMaster), '--cluster-yes');
    const created = await runRedisCli(this.access, args, UP_TIMEOUT_MS).catch((err: Error) => {
      throw new Error(`${err.message}\n${this.allLogs()}`);
    });
    if (!/All 16384 slots covered/.test(created)) {
      throw new Error(`redis-cli --cluster create did not cover every slot:\n${created}\n${this.allLogs()}`);
    }
  }

  /** As started: every node up and ok, all slots served, every master with its replicas linked. */
  private waitHealthy(timeoutMs: number): Promise<true> {
    return waitFor(
      `a healthy cluster of ${this.masterCount} masters with ${this.replicasPerMaster} replica(s) each`,
      timeoutMs,
      () => this.healthy(),
      this.allLogs,
    );
  }

  private async healthy(): Promise<true | undefined> {
    let masters = 0;
    for (const port of this.procs.keys()) {
      const ci = parseInfo(String(await command(this.access, port, 'CLUSTER', 'INFO')));
      if (ci.cluster_state !== 'ok' || Number(ci.cluster_known_nodes) !== this.total) return undefined;
      if (Number(ci.cluster_slots_ok) !== 16384) return undefined;
      const repl = await info(this.access, port, 'replication');
      if (repl.role === 'slave' && repl.master_link_status !== 'up') return undefined;
      if (repl.role === 'master') {
        masters++;
        if (Number(repl.connected_slaves) !== this.replicasPerMaster) return undefined;
      }
    }
    return masters === this.masterCount ? true : undefined;
  }

  /** What one live node says about itself. */
  private async self(port: number): Promise<ClusterNodeLine | undefined> {
    const view = parseClusterNodes(String(await command(this.access, port, 'CLUSTER', 'NODES')));
    return view.find((n) => n.flags.includes('myself'));
  }

  async masters(): Promise<number[]> {
    const out: number[] = [];
    for (const p of this.live()) {
      const me = await this.self(p.port);
      if (me?.flags.includes('master') && me.slots.length > 0) out.push(p.port);
    }
    return out.sort((a, b) => a - b);
  }

  async masterOf(key: string): Promise<number> {
    const anyLive = this.live()[0];
    if (!anyLive) throw new Error('masterOf: no node of the cluster is alive');
    const slot = Number(await command(this.access, anyLive.port, 'CLUSTER', 'KEYSLOT', key));
    // The authority on a slot is the live master that claims it for itself.
    const owners: number[] = [];
    for (const p of this.live()) {
      const me = await this.self(p.port);
      if (me?.flags.includes('master') && ownsSlot(me, slot)) owners.push(p.port);
    }
    if (owners.length !== 1) {
      throw new Error(
        `masterOf(${key}): slot ${slot} is claimed by ${owners.length} live masters (${owners.join(', ')})`,
      );
    }
    return owners[0] as number;
  }

  async killNode(port: number): Promise<void> {
    const proc = this.procs.get(port);
    if (!proc) throw new Error(`killNode(${port}): not a node of this cluster`);
    if (!isAlive(proc)) throw new Error(`killNode(${port}): already dead`);
    const me = await this.self(port).catch(() => undefined);
    this.slotsAtDeath.set(port, me?.flags.includes('master') ? me.slots : []);
    await killProc(proc);
  }

  async waitForFailover(deadPort: number, timeoutMs = 30_000): Promise<FailoverResult> {
    const proc = this.procs.get(deadPort);
    const slots = this.slotsAtDeath.get(deadPort);
    if (!proc || proc.killedAt === undefined || !slots) {
      throw new Error(`waitForFailover(${deadPort}): that node was not killed with killNode()`);
    }
    if (slots[0]?.[0] === undefined) {
      throw new Error(`waitForFailover(${deadPort}): it served no slot when killed (a replica?)`);
    }
    const killedAt = proc.killedAt;
    const newMasterPort = await waitFor(
      `a replica to take over the slots of ${HOST}:${deadPort}`,
      timeoutMs,
      () => this.takenOver(deadPort, slots),
      this.allLogs,
      50,
    );
    return { newMasterPort, ms: Date.now() - killedAt, killedAt };
  }

  /** The live master every live node routes the dead master's slots to, once they all agree. */
  private async takenOver(deadPort: number, slots: [number, number][]): Promise<number | undefined> {
    const probeSlot = slots[0]![0];
    let owner: number | undefined;
    for (const p of this.live()) {
      const ci = parseInfo(String(await command(this.access, p.port, 'CLUSTER', 'INFO')));
      if (ci.cluster_state !== 'ok') return undefined;
      const view = parseClusterNodes(String(await command(this.access, p.port, 'CLUSTER', 'NODES')));
      // Every live node must route the dead master's first slot to the same live master.
      const byView = view.find(
        (n) => n.flags.includes('master') && !n.flags.includes('fail') && ownsSlot(n, probeSlot),
      );
      if (!byView || byView.port === deadPort) return undefined;
      if (owner !== undefined && owner !== byView.port) return undefined;
      owner = byView.port;
    }
    if (owner === undefined) return undefined;
    const me = await this.self(owner);
    if (!me?.flags.includes('master')) return undefined;
    for (const [a, b] of slots) if (!ownsSlot(me, a) || !ownsSlot(me, b)) return undefined;
    return owner;
  }

  async waitForReplication(timeoutMs = 10_000): Promise<void> {
    await waitFor(
      'every replica to catch up with its master',
      timeoutMs,
      async () => {
        for (const port of await this.masters()) {
          if (!(await replicasCaughtUp(this.access, port))) return undefined;
        }
        return true;
      },
      this.allLogs,
      50,
    );
  }

  async heal(timeoutMs = 30_000): Promise<void> {
    for (const [port, proc] of this.procs) {
      if (isAlive(proc)) continue;
      this.procs.set(port, await relaunch(proc, 'a restarted cluster node', this.access));
      this.slotsAtDeath.delete(port);
    }
    await this.waitHealthy(timeoutMs);
  }

  async allKeys(pattern = '*'): Promise<string[]> {
    const keys: string[] = [];
    for (const port of await this.masters()) keys.push(...(await scanAll(this.access, port, pattern)));
    return keys.sort();
  }

  logTail(port: number): string {
    const proc = this.procs.get(port);
    return proc ? tail(proc) : `(no node on port ${port})`;
  }

  stop(): Promise<void> {
    return stopAll([...this.procs.values()], this.dir);
  }
}
