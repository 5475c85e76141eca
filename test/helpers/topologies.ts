// The Redis topologies the HA and TLS test files share: each is started once per run (all at once when
// the run begins, or on first use) and kept until the end of the run. Starting a Cluster or a Sentinel
// setup costs seconds of two busy cores, and the files that need one would otherwise each start their own.
//
// One process owns them (topologies-setup.ts, vitest's globalSetup: the main process), because it is the
// only one that lives as long as the run: it starts them, kills and restarts their nodes for the files
// (a killed master must be started again by the process that owns it, so that the end of the run stops
// it by pid), and stops them at the end. Test files reach it over a loopback HTTP endpoint whose address
// and token they get with `inject`. A file run without that globalSetup (another config) gets an owner
// of its own, in its own process, stopped after the file: the same topologies, started for it alone.
//
// Each file keeps to its own random key prefix on a shared topology. Files that kill a master heal the
// topology before they end (the killed node back as a replica, every slot served), and the owner checks
// that again before it hands the topology to the next file. Those files must not run at the same time,
// yet they need not wait for the whole rest of the suite either: each takes its turn from the owner for
// the whole file (useTopologies), and runs beside any file that uses no topology.
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { rmSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, inject } from 'vitest';
import { Redis } from 'ioredis';
import { scanKeys } from '../../src/redis/client.ts';
import {
  makeTlsFiles,
  startCluster,
  startSentinel,
  startStandalone,
  type FailoverResult,
  type HaNode,
  type RedisClusterHandle,
  type RedisSentinelHandle,
  type RedisStandaloneHandle,
  type TlsFiles,
} from './redis-ha.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The topology owner's endpoint, from topologies-setup.ts; absent when that globalSetup is not wired. */
    redisTopologies?: { url: string; token: string };
  }
}

/**
 * - standalone: one server, TLS and plain text on two ports, with a password (URL-encoded in the URLs).
 * - cluster: 3 masters + 3 replicas, TLS and plain text on two ports per node, with a password.
 * - sentinel: 1 master, 1 replica, 3 sentinels, plain text, no password.
 * - sentinel-tls: the same over TLS only, a password on the data nodes and another on the sentinels
 *   (a sentinel names one port per master, so one setup cannot serve both).
 */
export type TopologyName = 'standalone' | 'cluster' | 'sentinel' | 'sentinel-tls';
const NAMES: TopologyName[] = ['standalone', 'cluster', 'sentinel', 'sentinel-tls'];

export interface StandaloneInfo {
  /** rediss:// with the password. */
  url: string;
  /** redis:// with the password, the same server. */
  plainUrl: string;
  password: string;
  caFile: string;
  nodes: HaNode[];
}

export interface ClusterInfo {
  /** TLS ports (REDIS_CLUSTER_NODES with REDIS_TLS=true). */
  seeds: string;
  /** Plain-text ports of the same nodes. */
  plainSeeds: string;
  password: string;
  caFile: string;
  nodes: HaNode[];
  nodeTimeoutMs: number;
  failoverBoundMs: number;
}

export interface SentinelInfo {
  sentinels: string;
  masterName: string;
  password?: string | undefined;
  sentinelPassword?: string | undefined;
  caFile?: string | undefined;
  nodes: HaNode[];
  downAfterMs: number;
  failoverTimeoutMs: number;
  failoverBoundMs: number;
}

type Handle = RedisStandaloneHandle | RedisClusterHandle | RedisSentinelHandle;

const hex = () => randomBytes(6).toString('hex');

/** The owner: starts each topology once; answers the files' calls; stops them all. */
export class TopologyOwner {
  private readonly started = new Map<TopologyName, Promise<Handle>>();
  /** Every pid any topology ever ran (restarted nodes get new ones): all must be gone after stop(). */
  private readonly pids = new Set<number>();
  private tls: TlsFiles | undefined;
  private readonly tlsDir = mkdtempSync(join(tmpdir(), 'lt-topologies-ca-'));
  // Characters a URL must percent-encode, in the standalone server's password.
  private readonly passwords = {
    standalone: `Pw/url+${hex()}`,
    cluster: `Pw-data-${hex()}`,
    sentinelData: `Pw-data-${hex()}`,
    sentinel: `Pw-sentinel-${hex()}`,
  };

  /** The file whose turn it is (one at a time), and how the files waiting learn that it ended. */
  private turn: { holder: Holder; ended: Promise<void>; end: () => void } | undefined;

  /**
   * Resolves when it is this file's turn with the topologies. A holder whose process died (a file killed
   * mid-run by a timeout) gives its turn back, or the files after it would wait for ever.
   */
  async takeTurn(holder: Holder): Promise<void> {
    for (;;) {
      const t = this.turn;
      if (!t) {
        let end!: () => void;
        const ended = new Promise<void>((resolve) => (end = resolve));
        this.turn = { holder, ended, end };
        return;
      }
      if (t.holder.id === holder.id) return;
      await Promise.race([t.ended, new Promise((resolve) => setTimeout(resolve, 1000))]);
      if (this.turn === t && !pidAlive(t.holder.pid)) this.giveTurn(t.holder);
    }
  }

  giveTurn(holder: Holder): void {
    const t = this.turn;
    if (t?.holder.id !== holder.id) return;
    this.turn = undefined;
    t.end();
  }

  private ca(): TlsFiles {
    this.tls ??= makeTlsFiles(this.tlsDir);
    return this.tls;
  }

  private start(name: TopologyName): Promise<Handle> {
    let p = this.started.get(name);
    if (!p) {
      const tls = { dir: this.ca().dir };
      p =
        name === 'standalone'
          ? startStandalone({ password: this.passwords.standalone, tls, plainToo: true })
          : name === 'cluster'
            ? startCluster({ password: this.passwords.cluster, tls, plainToo: true })
            : name === 'sentinel'
              ? startSentinel()
              : startSentinel({
                  password: this.passwords.sentinelData,
                  sentinelPassword: this.passwords.sentinel,
                  tls,
                });
      this.started.set(name, p);
      // A topology that failed to start is tried again by the next file, which then fails loudly too.
      p.catch(() => this.started.delete(name));
    }
    return p;
  }

  private remember(h: Handle): HaNode[] {
    const nodes = h.nodes;
    for (const n of nodes) this.pids.add(n.pid);
    return nodes;
  }

  /**
   * Starts every topology in the background, at once: their start-up (seconds of waiting for nodes to
   * meet, sentinels to agree) then overlaps the test files' own, and each other's, instead of adding up
   * file after file. A start that fails is started again, and fails loudly, when a file asks for it.
   */
  prestart(): void {
    for (const name of NAMES) this.start(name).catch(() => {});
  }

  /**
   * Starts the topology if it is not running, heals it if an earlier file left a node dead, and says
   * how to reach it.
   */
  async describe(name: TopologyName): Promise<StandaloneInfo | ClusterInfo | SentinelInfo> {
    const h = await this.start(name);
    if ('heal' in h) await h.heal();
    const nodes = this.remember(h);
    if (name === 'standalone') {
      const s = h as RedisStandaloneHandle;
      return {
        url: s.url,
        plainUrl: s.plainUrl as string,
        password: this.passwords.standalone,
        caFile: this.ca().caFile,
        nodes,
      } satisfies StandaloneInfo;
    }
    if (name === 'cluster') {
      const c = h as RedisClusterHandle;
      return {
        seeds: c.seeds,
        plainSeeds: c.plainSeeds as string,
        password: this.passwords.cluster,
        caFile: this.ca().caFile,
        nodes,
        nodeTimeoutMs: c.nodeTimeoutMs,
        failoverBoundMs: c.failoverBoundMs,
      } satisfies ClusterInfo;
    }
    const s = h as RedisSentinelHandle;
    return {
      sentinels: s.sentinels,
      masterName: s.masterName,
      password: s.password,
      sentinelPassword: s.sentinelPassword,
      caFile: s.tls?.caFile,
      nodes,
      downAfterMs: s.downAfterMs,
      failoverTimeoutMs: s.failoverTimeoutMs,
      failoverBoundMs: s.failoverBoundMs,
    } satisfies SentinelInfo;
  }

  /** A method of a started topology's handle, by name (the ones CALLS lists). */
  async call(name: TopologyName, method: string, args: unknown[]): Promise<unknown> {
    if (method === 'takeTurn') return this.takeTurn(args[0] as Holder);
    if (method === 'giveTurn') return this.giveTurn(args[0] as Holder);
    if (!NAMES.includes(name)) throw new Error(`no topology named '${name}'`);
    if (method === 'describe') return this.describe(name);
    if (method === 'keysEverywhere') return this.keysEverywhere(String(args[0]));
    const allowed = CALLS[name];
    if (!allowed.includes(method)) throw new Error(`topology '${name}' has no method '${method}'`);
    const h = (await this.start(name)) as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>;
    const fn = h[method];
    if (typeof fn !== 'function') throw new Error(`topology '${name}': '${method}' is not a method`);
    // JSON turned an argument left out into null: the method's default applies to undefined only.
    const out = await fn.apply(
      h,
      args.map((a) => (a === null ? undefined : a)),
    );
    this.remember(h as unknown as Handle);
    return out;
  }

  /**
   * Keys matching `pattern` on every master of every topology running (the whole SCAN cursor of each):
   * where a run's keys went, and where they did not.
   */
  async keysEverywhere(pattern: string): Promise<Record<string, string[]>> {
    const out: Record<string, string[]> = {};
    for (const [name, p] of this.started) {
      const h = await p;
      if ('allKeys' in h) out[name] = await h.allKeys(pattern);
      else out[name] = await scanWhole(h.url, this.ca().ca, pattern);
    }
    return out;
  }

  /** Stops every topology; throws if any process it ever ran outlived that. */
  async stop(): Promise<void> {
    const handles = await Promise.allSettled(this.started.values());
    await Promise.all(
      handles.map((r) => (r.status === 'fulfilled' ? (this.remember(r.value), r.value.stop()) : undefined)),
    );
    this.started.clear();
    rmSync(this.tlsDir, { recursive: true, force: true });
    const alive = [...this.pids].filter(pidAlive);
    if (alive.length > 0) throw new Error(`redis-server pids ${alive.join(', ')} outlived their stop()`);
  }
}

/** A test file holding its turn: its process, and an id of the file's own (a fork may run several). */
interface Holder {
  pid: number;
  id: string;
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** What a file may ask of each topology, beyond describe and keysEverywhere. */
const CALLS: Record<TopologyName, string[]> = {
  standalone: [],
  cluster: ['masters', 'masterOf', 'killNode', 'waitForFailover', 'waitForReplication', 'heal', 'allKeys'],
  sentinel: [
    'masterPort',
    'replicaPorts',
    'killMaster',
    'waitForFailover',
    'waitForReplication',
    'heal',
    'allKeys',
  ],
  'sentinel-tls': ['masterPort', 'killMaster', 'waitForFailover', 'waitForReplication', 'heal', 'allKeys'],
};

/** The whole keyspace (SCAN to cursor 0) of one server matching `pattern`. */
export async function scanWhole(url: string, ca: Buffer | undefined, pattern: string): Promise<string[]> {
  const r = new Redis(url, {
    ...(url.startsWith('rediss:') && ca ? { tls: { ca } } : {}),
    lazyConnect: true,
    maxRetriesPerRequest: 1,
    retryStrategy: () => null,
  });
  r.on('error', () => {}); // surfaced by the command's rejection
  try {
    await r.connect();
    const out: string[] = [];
    for await (const keys of scanKeys(r, pattern)) out.push(...keys);
    return out.sort();
  } finally {
    r.disconnect();
  }
}

/** Serves an owner's calls on loopback, for the test processes; every call carries the token. */
export async function serveOwner(
  owner: TopologyOwner,
): Promise<{ url: string; token: string; server: Server }> {
  const token = randomBytes(16).toString('hex');
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      const reply = (status: number, value: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(value));
      };
      let call: { token?: string; name: TopologyName; method: string; args?: unknown[] };
      try {
        call = JSON.parse(body) as typeof call;
      } catch {
        return reply(400, { error: 'not JSON' });
      }
      if (call.token !== token) return reply(403, { error: 'wrong token' });
      owner.call(call.name, call.method, call.args ?? []).then(
        (value) => reply(200, { value: value ?? null }),
        (err: Error) => reply(500, { error: err.message }),
      );
    });
  });
  // Failovers and heals take seconds; no request of ours is to be cut short by the server.
  server.requestTimeout = 0;
  server.headersTimeout = 0;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, token, server };
}

type Caller = (name: TopologyName, method: string, args?: unknown[]) => Promise<unknown>;

let localOwner: TopologyOwner | undefined;

/** How long a file may wait for its turn: every other file on the topologies, each a minute at most. */
const TURN_WAIT_MS = 5 * 60_000;

/**
 * How this file reaches the shared topologies: through the owner in the main process when the
 * globalSetup is wired, else through an owner of the file's own (stopped after the file). Call it at the
 * top of a test file (it registers that afterAll).
 */
export function useTopologies(): Caller {
  const remote = inject('redisTopologies');
  if (remote) {
    const call: Caller = async (name, method, args = []) => {
      const res = await fetch(remote.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token: remote.token, name, method, args }),
      });
      const out = (await res.json()) as { value?: unknown; error?: string };
      if (!res.ok) throw new Error(`topology '${name}'.${method}: ${out.error ?? res.status}`);
      return out.value;
    };
    // One file at a time on the shared topologies (a failover in one would land in another's run): the
    // file waits for its turn before its own hooks, and gives it back after them.
    const holder: Holder = { pid: process.pid, id: randomBytes(8).toString('hex') };
    beforeAll(() => call('standalone', 'takeTurn', [holder]), TURN_WAIT_MS);
    afterAll(() => call('standalone', 'giveTurn', [holder]));
    return call;
  }
  afterAll(async () => {
    const owner = localOwner;
    localOwner = undefined;
    await owner?.stop();
  }, 60_000);
  return (name, method, args = []) => {
    localOwner ??= new TopologyOwner();
    return localOwner.call(name, method, args);
  };
}

/** A shared Cluster, as a test file sees it (the ports are the TLS ones, as CLUSTER NODES names them). */
export interface SharedCluster {
  info: ClusterInfo;
  masters(): Promise<number[]>;
  masterOf(key: string): Promise<number>;
  killNode(port: number): Promise<void>;
  waitForFailover(port: number, timeoutMs?: number): Promise<FailoverResult>;
  waitForReplication(): Promise<void>;
  heal(): Promise<void>;
  allKeys(pattern: string): Promise<string[]>;
  /** The plain-text port of the node whose TLS port is `port`. */
  plainPortOf(port: number): number;
}

export async function sharedCluster(call: Caller): Promise<SharedCluster> {
  const info = (await call('cluster', 'describe')) as ClusterInfo;
  const c = (method: string, ...args: unknown[]) => call('cluster', method, args);
  return {
    info,
    masters: async () => (await c('masters')) as number[],
    masterOf: async (key) => (await c('masterOf', key)) as number,
    killNode: async (port) => void (await c('killNode', port)),
    waitForFailover: async (port, timeoutMs) =>
      (await c('waitForFailover', port, timeoutMs)) as FailoverResult,
    waitForReplication: async () => void (await c('waitForReplication')),
    heal: async () => void (await c('heal')),
    allKeys: async (pattern) => (await c('allKeys', pattern)) as string[],
    plainPortOf(port) {
      const n = info.nodes.find((x) => x.port === port);
      if (n?.plainPort === undefined) throw new Error(`no cluster node with TLS port ${port}`);
      return n.plainPort;
    },
  };
}

/** A shared Sentinel setup, as a test file sees it. */
export interface SharedSentinel {
  info: SentinelInfo;
  masterPort(): Promise<number>;
  replicaPorts(): Promise<number[]>;
  killMaster(): Promise<number>;
  waitForFailover(port: number, timeoutMs?: number): Promise<FailoverResult>;
  waitForReplication(): Promise<void>;
  heal(): Promise<void>;
  allKeys(pattern: string): Promise<string[]>;
}

export async function sharedSentinel(
  call: Caller,
  name: 'sentinel' | 'sentinel-tls' = 'sentinel',
): Promise<SharedSentinel> {
  const info = (await call(name, 'describe')) as SentinelInfo;
  const c = (method: string, ...args: unknown[]) => call(name, method, args);
  return {
    info,
    masterPort: async () => (await c('masterPort')) as number,
    replicaPorts: async () => (await c('replicaPorts')) as number[],
    killMaster: async () => (await c('killMaster')) as number,
    waitForFailover: async (port, timeoutMs) =>
      (await c('waitForFailover', port, timeoutMs)) as FailoverResult,
    waitForReplication: async () => void (await c('waitForReplication')),
    heal: async () => void (await c('heal')),
    allKeys: async (pattern) => (await c('allKeys', pattern)) as string[],
  };
}

/** Keys matching `pattern` on every master of every running topology, by topology. */
export async function keysEverywhere(call: Caller, pattern: string): Promise<Record<string, string[]>> {
  // The owner answers keysEverywhere for any name, and starts nothing for it.
  return (await call('sentinel', 'keysEverywhere', [pattern])) as Record<string, string[]>;
}
