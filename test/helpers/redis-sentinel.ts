// A Sentinel setup for tests: 1 master, 1 replica and 3 sentinels by default (`redis-server FILE
// --sentinel`), started from the redis-server binary on free ports, its master killed and healed back.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { accessFor, dataNodeArgs, sentinelFailoverBoundMs } from './redis-ha-access.ts';
import {
  HOST,
  UP_TIMEOUT_MS,
  command,
  info,
  isAlive,
  killProc,
  relaunch,
  replicasCaughtUp,
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
  RedisSentinelHandle,
  RedisSentinelOptions,
  TlsFiles,
} from './redis-ha-types.ts';

function pairsToRecord(flat: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (!Array.isArray(flat)) return out;
  for (let i = 0; i + 1 < flat.length; i += 2) out[String(flat[i])] = String(flat[i + 1]);
  return out;
}

/** Flags of a replica a sentinel does not count: down, or cut off from its master. */
const REPLICA_DOWN = /s_down|o_down|disconnected/;

export async function startSentinel(opts: RedisSentinelOptions = {}): Promise<RedisSentinelHandle> {
  const setup = new RedisSentinel(opts);
  await setup.start();
  return setup;
}

class RedisSentinel implements RedisSentinelHandle {
  sentinels = '';
  sentinelPorts: number[] = [];
  readonly masterName: string;
  readonly downAfterMs: number;
  readonly failoverTimeoutMs: number;
  readonly failoverBoundMs: number;
  readonly dir = topologyDir('sentinel');
  setupMs = 0;
  password: string | undefined;
  readonly sentinelPassword: string | undefined;
  tls: TlsFiles | undefined;
  private readonly startedAt = Date.now();
  private readonly replicaCount: number;
  private readonly sentinelCount: number;
  private readonly data = new Map<number, Proc>();
  private readonly sents = new Map<number, Proc>();
  private access: NodeAccess = {};
  private sentinelAccess: NodeAccess = {};

  constructor(private readonly opts: RedisSentinelOptions) {
    this.masterName = opts.masterName ?? 'ltmaster';
    this.replicaCount = opts.replicas ?? 1;
    this.sentinelCount = opts.sentinels ?? 3;
    this.downAfterMs = opts.downAfterMs ?? 1000;
    this.failoverTimeoutMs = opts.failoverTimeoutMs ?? 3000;
    this.failoverBoundMs = sentinelFailoverBoundMs(this.downAfterMs, this.failoverTimeoutMs);
    this.sentinelPassword = opts.sentinelPassword;
  }

  get nodes(): HaNode[] {
    return this.all().map((p) => ({ port: p.port, plainPort: p.plainPort, pid: p.pid }));
  }

  private all(): Proc[] {
    return [...this.data.values(), ...this.sents.values()];
  }

  private allLogs = () =>
    this.all()
      .map((p) => tail(p, 800))
      .join('\n');

  private liveSentinels(): Proc[] {
    return [...this.sents.values()].filter(isAlive);
  }

  /** What a sentinel on `port` answers to `SENTINEL <sub> <master name>`. */
  private ask(port: number, sub: string): Promise<unknown> {
    return command(this.sentinelAccess, port, 'SENTINEL', sub, this.masterName);
  }

  /** The replicas a sentinel on `port` knows, each as its field record. */
  private async replicasSeenBy(port: number): Promise<Record<string, string>[]> {
    return ((await this.ask(port, 'REPLICAS')) as unknown[]).map(pairsToRecord);
  }

  /** The master, its replicas in sync, the sentinels all agreeing; on any failure, everything stopped. */
  async start(): Promise<void> {
    try {
      this.access = accessFor(this.opts, this.dir);
      this.sentinelAccess = { password: this.opts.sentinelPassword, tls: this.access.tls };
      const master = await this.spawnData([], 'the sentinel master');
      await this.startReplicas(master.port);
      await Promise.all(Array.from({ length: this.sentinelCount }, () => this.spawnSentinel(master.port)));
      await waitFor(
        `every sentinel to know the master, its ${this.replicaCount} replica(s) and the other sentinels`,
        UP_TIMEOUT_MS,
        () => this.sentinelsKnowAll(master.port),
        this.allLogs,
      );
    } catch (err) {
      await this.stop();
      throw err;
    }
    this.sentinels = [...this.sents.keys()].map((p) => `${HOST}:${p}`).join(',');
    this.sentinelPorts = [...this.sents.keys()];
    this.password = this.access.password;
    this.tls = this.access.tls;
    this.setupMs = Date.now() - this.startedAt;
  }

  private async spawnData(extra: string[], what: string): Promise<Proc> {
    const p = await spawnRedis(
      this.dir,
      false,
      (port, logFile, plainPort) => [
        ...dataNodeArgs(this.access, port, false, this.dir, logFile, plainPort),
        ...extra,
      ],
      what,
      this.access,
    );
    this.data.set(p.port, p);
    return p;
  }

  private async startReplicas(masterPort: number): Promise<void> {
    const replicas = await Promise.all(
      Array.from({ length: this.replicaCount }, () =>
        this.spawnData(['--replicaof', HOST, String(masterPort)], 'a replica'),
      ),
    );
    await waitFor(
      'the replicas to sync with the master',
      UP_TIMEOUT_MS,
      async () => {
        for (const r of replicas) {
          if ((await info(this.access, r.port, 'replication')).master_link_status !== 'up') return undefined;
        }
        return true;
      },
      this.allLogs,
    );
  }

  private async spawnSentinel(masterPort: number): Promise<Proc> {
    const p = await spawnRedis(
      this.dir,
      false,
      (port, logFile) => {
        // Sentinel rewrites its config file: one writable file per sentinel, by absolute path.
        const file = join(this.dir, `sentinel-${port}.conf`);
        writeFileSync(file, this.sentinelConfig(port, logFile, masterPort));
        return [file, '--sentinel'];
      },
      'a sentinel',
      this.sentinelAccess,
    );
    this.sents.set(p.port, p);
    return p;
  }

  private sentinelConfig(port: number, logFile: string, masterPort: number): string {
    const { tls, password } = this.access;
    const name = this.masterName;
    const quorum = Math.floor(this.sentinelCount / 2) + 1;
    return [
      ...(tls
        ? [
            // TLS only; tls-replication: the sentinel's own links (to the nodes, to the other
            // sentinels) go over TLS too, and it announces its TLS port.
            'port 0',
            `tls-port ${port}`,
            `tls-cert-file ${tls.certFile}`,
            `tls-key-file ${tls.keyFile}`,
            `tls-ca-cert-file ${tls.caFile}`,
            'tls-auth-clients no',
            'tls-replication yes',
          ]
        : [`port ${port}`]),
      // The sentinels give requirepass to each other too (no sentinel-pass set).
      ...(this.opts.sentinelPassword ? [`requirepass ${this.opts.sentinelPassword}`] : []),
      `bind ${HOST}`,
      `dir ${this.dir}`,
      `logfile ${logFile}`,
      'sentinel resolve-hostnames no',
      `sentinel monitor ${name} ${HOST} ${masterPort} ${quorum}`,
      `sentinel down-after-milliseconds ${name} ${this.downAfterMs}`,
      `sentinel failover-timeout ${name} ${this.failoverTimeoutMs}`,
      `sentinel parallel-syncs ${name} 1`,
      ...(password ? [`sentinel auth-pass ${name} ${password}`] : []),
      '',
    ].join('\n');
  }

  /** Every sentinel names the master, knows the other sentinels and counts every replica up. */
  private async sentinelsKnowAll(masterPort: number): Promise<true | undefined> {
    for (const port of this.sents.keys()) {
      const addr = (await this.ask(port, 'GET-MASTER-ADDR-BY-NAME')) as string[];
      if (Number(addr?.[1]) !== masterPort) return undefined;
      const others = (await this.ask(port, 'SENTINELS')) as unknown[];
      if (others.length !== this.sentinelCount - 1) return undefined;
      const ok = (await this.replicasSeenBy(port)).filter((r) => !REPLICA_DOWN.test(r.flags ?? ''));
      if (ok.length !== this.replicaCount) return undefined;
    }
    return true;
  }

  async masterPort(): Promise<number> {
    let lastErr: unknown;
    for (const s of this.liveSentinels()) {
      try {
        const addr = (await this.ask(s.port, 'GET-MASTER-ADDR-BY-NAME')) as string[];
        const port = Number(addr?.[1]);
        if (Number.isInteger(port) && port > 0) return port;
      } catch (err) {
        lastErr = err;
      }
    }
    throw new Error(
      `no sentinel named a master for ${this.masterName}: ${(lastErr as Error)?.message ?? ''}`,
    );
  }

  async replicaPorts(): Promise<number[]> {
    const s = this.liveSentinels()[0];
    if (!s) throw new Error('replicaPorts: no sentinel is alive');
    return (await this.replicasSeenBy(s.port))
      .filter((r) => !REPLICA_DOWN.test(r.flags ?? ''))
      .map((r) => Number(r.port))
      .sort((a, b) => a - b);
  }

  /** As started: every sentinel names one live master, which has all its replicas, in sync. */
  private waitHealthy(timeoutMs: number): Promise<true> {
    return waitFor(
      `every sentinel to name one master with its ${this.replicaCount} replica(s) in sync`,
      timeoutMs,
      () => this.healthy(),
      this.allLogs,
      50,
    );
  }

  private async healthy(): Promise<true | undefined> {
    let agreed: number | undefined;
    for (const port of this.sents.keys()) {
      const m = pairsToRecord(await this.ask(port, 'MASTER'));
      if (m.flags !== 'master') return undefined;
      const p = Number(m.port);
      if (agreed !== undefined && agreed !== p) return undefined;
      agreed = p;
      const reps = await this.replicasSeenBy(port);
      const ok = reps.filter((r) => r.flags === 'slave' && r['master-link-status'] === 'ok');
      if (ok.length !== this.replicaCount) return undefined;
    }
    const master = agreed === undefined ? undefined : this.data.get(agreed);
    if (agreed === undefined || !master || !isAlive(master)) return undefined;
    const repl = await info(this.access, agreed, 'replication');
    if (repl.role !== 'master' || Number(repl.connected_slaves) !== this.replicaCount) return undefined;
    return (await replicasCaughtUp(this.access, agreed)) ? true : undefined;
  }

  async killMaster(): Promise<number> {
    const port = await this.masterPort();
    const proc = this.data.get(port);
    if (!proc)
      throw new Error(`killMaster: the sentinels name port ${port}, which this handle did not start`);
    if (!isAlive(proc)) throw new Error(`killMaster: the master on ${port} is already dead`);
    await killProc(proc);
    return port;
  }

  async waitForFailover(oldPort: number, timeoutMs = 30_000): Promise<FailoverResult> {
    const proc = this.data.get(oldPort);
    if (!proc || proc.killedAt === undefined) {
      throw new Error(`waitForFailover(${oldPort}): that master was not killed with killMaster()`);
    }
    const killedAt = proc.killedAt;
    const newMasterPort = await waitFor(
      `the sentinels to promote a replica of ${HOST}:${oldPort}`,
      timeoutMs,
      () => this.promoted(oldPort),
      this.allLogs,
      50,
    );
    return { newMasterPort, ms: Date.now() - killedAt, killedAt };
  }

  /** The new master every live sentinel names instead of `oldPort`, once it answers as a master. */
  private async promoted(oldPort: number): Promise<number | undefined> {
    let agreed: number | undefined;
    for (const s of this.liveSentinels()) {
      const addr = (await this.ask(s.port, 'GET-MASTER-ADDR-BY-NAME')) as string[];
      const port = Number(addr?.[1]);
      if (port === oldPort || (agreed !== undefined && agreed !== port)) return undefined;
      agreed = port;
    }
    if (agreed === undefined) return undefined;
    const repl = await info(this.access, agreed, 'replication');
    return repl.role === 'master' ? agreed : undefined;
  }

  async waitForReplication(timeoutMs = 10_000): Promise<void> {
    await waitFor(
      'every replica to catch up with the master',
      timeoutMs,
      async () => ((await replicasCaughtUp(this.access, await this.masterPort())) ? true : undefined),
      this.allLogs,
      50,
    );
  }

  async heal(timeoutMs = 30_000): Promise<void> {
    const dead = [...this.data.values()].filter((p) => !isAlive(p));
    if (dead.length > 0) {
      // As a replica of the master the sentinels name now: started as it was (a master), it would
      // serve an empty dataset until a sentinel converts it, which it does only after 8 s.
      const master = await this.masterPort();
      for (const proc of dead) {
        const again = await relaunch(proc, 'a restarted data node', this.access, [
          '--replicaof',
          HOST,
          String(master),
        ]);
        this.data.set(proc.port, again);
      }
    }
    await this.waitHealthy(timeoutMs);
  }

  async allKeys(pattern = '*'): Promise<string[]> {
    return (await scanAll(this.access, await this.masterPort(), pattern)).sort();
  }

  logTail(port: number): string {
    const proc = this.data.get(port) ?? this.sents.get(port);
    return proc ? tail(proc) : `(no process on port ${port})`;
  }

  stop(): Promise<void> {
    return stopAll(this.all(), this.dir);
  }
}
