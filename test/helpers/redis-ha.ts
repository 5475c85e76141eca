// Real, local, highly available Redis topologies for tests, started from the redis-server binary:
// - startCluster(): a Redis Cluster (3 masters + 3 replicas by default),
// - startSentinel(): 1 master, 1 replica and 3 sentinels (`redis-server <file> --sentinel`).
// Every node gets a random free port (cluster ports <= 55535: a node's bus listens on port + 10000) and a
// private temporary directory. stop() kills every process the handle started, by pid, and removes the
// directory; a process 'exit' hook SIGKILLs whatever a crashed test left behind. Nothing here ever talks
// to the shared Redis at 6379. Anything that does not come up in time throws with the nodes' log tails.
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { scanKeys } from '../../src/redis/client.ts';
import { requireRedisServer } from './redis-server.ts';

const HOST = '127.0.0.1';
/** How long anything may take to come up before we throw. */
const UP_TIMEOUT_MS = 20_000;
// Cluster ports: a node's bus listens on port + 10000, which must be a valid port too.
const PORT_MIN = 30_000;
const PORT_MAX = 55_535;
const BUS_OFFSET = 10_000;

export interface HaNode {
  port: number;
  /** With `plainToo`: the node's plain-text port beside its TLS `port`. */
  plainPort?: number | undefined;
  pid: number;
}

export interface FailoverResult {
  /** The port now serving what the dead master served. */
  newMasterPort: number;
  /** From the kill (killNode/killMaster) to the moment the new master was seen serving. */
  ms: number;
  /** When the SIGKILL was sent (Date.now() of this machine), to line up with what clients saw. */
  killedAt: number;
}

/** Files of a throwaway CA and the server certificate it signed (CN localhost, SAN localhost + 127.0.0.1). */
export interface TlsFiles {
  dir: string;
  /** The CA certificate (PEM): what REDIS_TLS_CA points at. */
  caFile: string;
  certFile: string;
  keyFile: string;
  /** The CA certificate's contents. */
  ca: Buffer;
}

/** Credentials and TLS for the nodes of a topology. Without them, nodes listen in plain text, no password. */
export interface RedisAccessOptions {
  /** requirepass + masterauth on every data node (sentinels get `sentinel auth-pass`). */
  password?: string;
  /**
   * TLS only (`--port 0 --tls-port P`, replication and cluster bus over TLS too; clients need no certificate),
   * with a throwaway CA made by openssl: `true` makes it in the handle's directory, `{ dir }` in `dir`, where
   * the files of an earlier call are reused (one CA, one REDIS_TLS_CA, for several topologies).
   */
  tls?: true | { dir: string };
  /**
   * With `tls`: every data node also listens in plain text on a port of its own (`port` and `tls-port` at
   * once), so that one topology serves the TLS tests and the plain ones. A Cluster node then answers a
   * plain-text client with the plain ports of its peers (CLUSTER SLOTS, MOVED), a TLS client with the TLS
   * ones. Sentinel cannot do this: it names one port per master, so a Sentinel setup is TLS or plain.
   */
  plainToo?: boolean;
}

/** What the harness's own control connections (and redis-cli) need to reach a node. */
interface NodeAccess {
  password?: string | undefined;
  tls?: TlsFiles | undefined;
  plainToo?: boolean | undefined;
}

export interface RedisClusterOptions extends RedisAccessOptions {
  /** Masters (>= 3, redis-cli's minimum). Default 3. */
  masters?: number;
  /** Replicas per master. Default 1. */
  replicasPerMaster?: number;
  /** cluster-node-timeout: how long a node may be silent before it is considered failing. Default 1500. */
  nodeTimeoutMs?: number;
}

export interface RedisClusterHandle {
  /** Every node as "127.0.0.1:p1,127.0.0.1:p2,..." (the REDIS_CLUSTER_NODES format). */
  seeds: string;
  /** With `plainToo`: the same nodes' plain-text ports, in the same format. */
  plainSeeds?: string | undefined;
  /** Every node, with the pid of its current process (a restarted node has a new one). */
  readonly nodes: HaNode[];
  /** cluster-node-timeout, as configured. */
  nodeTimeoutMs: number;
  /** The longest a failover may take with this configuration (see clusterFailoverBoundMs). */
  failoverBoundMs: number;
  /** The handle's temporary directory (node configs and logs). */
  dir: string;
  /** How long startCluster took, in ms. */
  setupMs: number;
  /** The data nodes' password, when started with one. */
  password?: string | undefined;
  /** The CA and certificate, when started with TLS (nodes then listen on TLS only). */
  tls?: TlsFiles | undefined;
  /** Ports of the live masters that serve slots, ascending. */
  masters(): Promise<number[]>;
  /** Port of the live master serving the key's slot. */
  masterOf(key: string): Promise<number>;
  /** SIGKILLs the node on that port and waits for the process to be gone. */
  killNode(port: number): Promise<void>;
  /**
   * After killNode(deadPort) on a master: waits until every live node reports cluster_state:ok and agrees
   * that one live master serves all the dead master's slots.
   */
  waitForFailover(deadPort: number, timeoutMs?: number): Promise<FailoverResult>;
  /** Waits until every live replica has acknowledged everything its master has written. */
  waitForReplication(timeoutMs?: number): Promise<void>;
  /**
   * Starts every killed node again (same port, same nodes.conf: it rejoins as a replica of whoever took
   * its slots) and waits until the cluster is as it started: cluster_state:ok on every node, all 16384
   * slots served, every master with its replicas in sync. What a shared cluster needs after a failover.
   */
  heal(timeoutMs?: number): Promise<void>;
  /** SCAN over every live master. */
  allKeys(pattern?: string): Promise<string[]>;
  /** Tail of a node's log, for failure messages. */
  logTail(port: number): string;
  stop(): Promise<void>;
}

export interface RedisSentinelOptions extends RedisAccessOptions {
  /** requirepass on the sentinels themselves (REDIS_SENTINEL_PASSWORD); they use it among themselves too. */
  sentinelPassword?: string;
  /** Default 'ltmaster'. */
  masterName?: string;
  /** Replicas of the master. Default 1. */
  replicas?: number;
  /** Sentinels (quorum is a majority). Default 3. */
  sentinels?: number;
  /** sentinel down-after-milliseconds. Default 1000. */
  downAfterMs?: number;
  /** sentinel failover-timeout. Default 3000. */
  failoverTimeoutMs?: number;
}

export interface RedisSentinelHandle {
  /** Every sentinel as "127.0.0.1:s1,127.0.0.1:s2,..." (the REDIS_SENTINELS format). */
  sentinels: string;
  sentinelPorts: number[];
  masterName: string;
  /** Every process: data nodes and sentinels, with the pid of its current process. */
  readonly nodes: HaNode[];
  /** sentinel down-after-milliseconds and failover-timeout, as configured. */
  downAfterMs: number;
  failoverTimeoutMs: number;
  /** The longest a failover may take with this configuration (see sentinelFailoverBoundMs). */
  failoverBoundMs: number;
  dir: string;
  setupMs: number;
  /** The data nodes' password, when started with one. */
  password?: string | undefined;
  /** The sentinels' own password, when started with one. */
  sentinelPassword?: string | undefined;
  /** The CA and certificate, when started with TLS (data nodes and sentinels then listen on TLS only). */
  tls?: TlsFiles | undefined;
  /** The master's port as the sentinels report it (SENTINEL GET-MASTER-ADDR-BY-NAME). */
  masterPort(): Promise<number>;
  /** Ports of the replicas the sentinels know and do not consider down. */
  replicaPorts(): Promise<number[]>;
  /** SIGKILLs the current master; returns its port. */
  killMaster(): Promise<number>;
  /**
   * After killMaster(): waits until every live sentinel names a new master and that node answers as a
   * master.
   */
  waitForFailover(oldPort: number, timeoutMs?: number): Promise<FailoverResult>;
  /** Waits until every live replica has acknowledged everything the master has written. */
  waitForReplication(timeoutMs?: number): Promise<void>;
  /**
   * Starts every killed data node again as a replica of the current master and waits until the setup is
   * as it started: every sentinel names one live master, which has all its replicas in sync.
   */
  heal(timeoutMs?: number): Promise<void>;
  /** SCAN on the current master. */
  allKeys(pattern?: string): Promise<string[]>;
  logTail(port: number): string;
  stop(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------------------
// Processes, and the safety net for the ones a crashed test leaves behind

interface Proc {
  port: number;
  plainPort?: number | undefined;
  /** What it was started with, to start it again on the same port(s) and directory. */
  argv: string[];
  child: ChildProcess;
  pid: number;
  exited: Promise<void>;
  logFile: string;
  stderr: string;
  killedAt?: number;
}

const livePids = new Set<number>();
const liveDirs = new Set<string>();
let safetyNetInstalled = false;

function killLeftovers(): void {
  for (const pid of livePids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  livePids.clear();
  for (const dir of liveDirs) rmSync(dir, { recursive: true, force: true });
  liveDirs.clear();
}

function installSafetyNet(): void {
  if (safetyNetInstalled) return;
  safetyNetInstalled = true;
  process.on('exit', killLeftovers);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    const onSignal = () => {
      killLeftovers();
      process.removeListener(sig, onSignal);
      // Nobody else handles it: die of it, as we would have without this listener.
      if (process.listenerCount(sig) === 0) process.kill(process.pid, sig);
    };
    process.on(sig, onSignal);
  }
}

function tail(proc: Proc, chars = 1500): string {
  let text = proc.stderr;
  try {
    if (existsSync(proc.logFile)) text = readFileSync(proc.logFile, 'utf8') + text;
  } catch {
    // unreadable: the stderr we have is all there is
  }
  text = text.slice(-chars).trimEnd();
  return `--- log of ${HOST}:${proc.port} (pid ${proc.pid}) ---\n${text || '(empty)'}`;
}

function isAlive(proc: Proc): boolean {
  return proc.child.exitCode === null && proc.child.signalCode === null;
}

async function killProc(proc: Proc, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
  if (isAlive(proc)) {
    proc.killedAt ??= Date.now();
    proc.child.kill(signal);
    const timer = setTimeout(() => proc.child.kill('SIGKILL'), 5_000);
    await proc.exited;
    clearTimeout(timer);
  }
  livePids.delete(proc.pid);
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, HOST, () => srv.close(() => resolve(true)));
  });
}

const claimedPorts = new Set<number>();

/** A random port in [30000, 55535] that is free, and whose bus port (+10000) is free too when asked. */
async function pickPort(withBus: boolean): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const port = PORT_MIN + Math.floor(Math.random() * (PORT_MAX - PORT_MIN + 1));
    if (claimedPorts.has(port) || (withBus && claimedPorts.has(port + BUS_OFFSET))) continue;
    if (!(await portFree(port))) continue;
    if (withBus && !(await portFree(port + BUS_OFFSET))) continue;
    claimedPorts.add(port);
    return port;
  }
  throw new Error(`no free port in ${PORT_MIN}-${PORT_MAX} after 200 tries`);
}

/** A client for one admin exchange: no retries, short timeouts, errors surface as rejections. */
function adminClient(access: NodeAccess, port: number): Redis {
  const r = new Redis({
    host: HOST,
    port,
    ...(access.password ? { password: access.password } : {}),
    ...(access.tls ? { tls: { ca: access.tls.ca } } : {}),
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 1_000,
    commandTimeout: 3_000,
    enableReadyCheck: false,
    enableOfflineQueue: false,
  });
  r.on('error', () => {}); // surfaced by the command's rejection
  return r;
}

async function withNode<T>(access: NodeAccess, port: number, fn: (r: Redis) => Promise<T>): Promise<T> {
  const r = adminClient(access, port);
  try {
    await r.connect();
    return await fn(r);
  } finally {
    r.disconnect();
  }
}

async function command(access: NodeAccess, port: number, ...args: (string | number)[]): Promise<unknown> {
  return withNode(access, port, (r) => r.call(String(args[0]), ...args.slice(1)));
}

async function info(access: NodeAccess, port: number, section: string): Promise<Record<string, string>> {
  return parseInfo(String(await command(access, port, 'INFO', section)));
}

function parseInfo(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split(/\r?\n/)) {
    const i = line.indexOf(':');
    if (i > 0 && !line.startsWith('#')) out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
}

/**
 * Starts `redis-server args...` on a free port (the port is appended as --port, or written into the config
 * file by `args`), waits for PING. A port taken between the check and the bind is retried on another one.
 */
async function spawnRedis(
  dir: string,
  withBus: boolean,
  args: (port: number, logFile: string, plainPort?: number) => string[],
  what: string,
  access: NodeAccess,
): Promise<Proc> {
  requireRedisServer();
  installSafetyNet();
  for (let attempt = 1; ; attempt++) {
    const port = await pickPort(withBus);
    const plainPort = access.tls && access.plainToo ? await pickPort(false) : undefined;
    const logFile = join(dir, `redis-${port}.log`);
    const proc = launch(dir, args(port, logFile, plainPort), port, plainPort, logFile);
    try {
      await waitUp(proc, what, access);
      return proc;
    } catch (err) {
      claimedPorts.delete(port);
      if (plainPort !== undefined) claimedPorts.delete(plainPort);
      // Raced for the port: another one.
      if (/Address already in use/i.test((err as Error).message) && attempt < 5) continue;
      throw err;
    }
  }
}

function launch(
  dir: string,
  argv: string[],
  port: number,
  plainPort: number | undefined,
  logFile: string,
): Proc {
  const child = spawn('redis-server', argv, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  if (child.pid === undefined) throw new Error(`could not start redis-server ${argv.join(' ')}`);
  const proc: Proc = {
    port,
    plainPort,
    argv,
    child,
    pid: child.pid,
    exited: new Promise((resolve) => child.once('exit', () => resolve())),
    logFile,
    stderr: '',
  };
  livePids.add(proc.pid);
  child.stderr?.on('data', (d: Buffer) => (proc.stderr = (proc.stderr + d.toString()).slice(-4000)));
  return proc;
}

async function waitUp(proc: Proc, what: string, access: NodeAccess): Promise<void> {
  const deadline = Date.now() + UP_TIMEOUT_MS;
  for (;;) {
    if (!isAlive(proc)) {
      livePids.delete(proc.pid);
      throw new Error(`redis-server for ${what} on port ${proc.port} exited at start\n${tail(proc)}`);
    }
    try {
      if ((await command(access, proc.port, 'PING')) === 'PONG') return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await killProc(proc);
      throw new Error(
        `redis-server for ${what} on port ${proc.port} did not answer PING in ${UP_TIMEOUT_MS} ms\n${tail(proc)}`,
      );
    }
    await sleep(50);
  }
}

/** Starts a dead node again with the arguments it had (plus `extra`), on the same port(s). */
async function relaunch(proc: Proc, what: string, access: NodeAccess, extra: string[] = []): Promise<Proc> {
  const again = launch(
    dirname(proc.logFile),
    [...proc.argv, ...extra],
    proc.port,
    proc.plainPort,
    proc.logFile,
  );
  // The argv of record stays the original: a later restart adds its own `extra`.
  again.argv = proc.argv;
  await waitUp(again, what, access);
  return again;
}

/** Polls `check` until it returns a value (not undefined); throws with `explain()` and the logs at the deadline. */
async function waitFor<T>(
  what: string,
  timeoutMs: number,
  check: () => Promise<T | undefined>,
  logs: () => string,
  intervalMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined) return v;
    } catch (err) {
      last = (err as Error).message;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}` +
          (last ? ` (last error: ${last})` : '') +
          `\n${logs()}`,
      );
    }
    await sleep(intervalMs);
  }
}

async function scanAll(access: NodeAccess, port: number, pattern: string): Promise<string[]> {
  return withNode(access, port, async (r) => {
    const out: string[] = [];
    for await (const keys of scanKeys(r, pattern)) out.push(...keys);
    return out;
  });
}

/** Every replica of the master on `port` has acknowledged the master's replication offset. */
async function replicasCaughtUp(access: NodeAccess, port: number): Promise<boolean> {
  const repl = await info(access, port, 'replication');
  const offset = Number(repl.master_repl_offset);
  const count = Number(repl.connected_slaves ?? 0);
  for (let i = 0; i < count; i++) {
    const m = /offset=(\d+)/.exec(repl[`slave${i}`] ?? '');
    if (!m || Number(m[1]) < offset) return false;
  }
  return true;
}

/** redis-cli with the nodes' access: TLS flags on the command line, the password in REDISCLI_AUTH (not argv). */
function runRedisCli(access: NodeAccess, args: string[], timeoutMs: number): Promise<string> {
  const full = [...(access.tls ? ['--tls', '--cacert', access.tls.caFile] : []), ...args];
  const env = { ...process.env, ...(access.password ? { REDISCLI_AUTH: access.password } : {}) };
  return new Promise((resolve, reject) => {
    execFile('redis-cli', full, { timeout: timeoutMs, encoding: 'utf8', env }, (err, stdout, stderr) => {
      if (err) reject(new Error(`redis-cli ${full.join(' ')} failed: ${err.message}\n${stdout}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

// ---------------------------------------------------------------------------------------------------------
// Credentials and TLS

function openssl(dir: string, args: string[]): void {
  try {
    execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'], timeout: 20_000 });
  } catch (err) {
    const e = err as { code?: string; stderr?: Buffer; message: string };
    throw new Error(
      e.code === 'ENOENT'
        ? 'the TLS tests make their certificates with openssl and none is on PATH: install the openssl package'
        : `openssl ${args.join(' ')} failed: ${e.message}\n${e.stderr?.toString() ?? ''}`,
    );
  }
}

/**
 * A throwaway CA and a server certificate it signed (EC P-256, valid 2 days, SAN localhost and 127.0.0.1),
 * in `dir`. Files an earlier call left there are reused.
 */
export function makeTlsFiles(dir: string): TlsFiles {
  mkdirSync(dir, { recursive: true });
  const files = {
    dir,
    caFile: join(dir, 'ca.crt'),
    certFile: join(dir, 'server.crt'),
    keyFile: join(dir, 'server.key'),
  };
  if (![files.caFile, files.certFile, files.keyFile].every((f) => existsSync(f))) {
    const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
    openssl(dir, [
      'req',
      '-x509',
      ...ec,
      '-keyout',
      'ca.key',
      '-out',
      'ca.crt',
      '-days',
      '2',
      '-subj',
      '/CN=learner-transfer test CA',
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ]);
    openssl(dir, [
      'req',
      '-new',
      ...ec,
      '-keyout',
      'server.key',
      '-out',
      'server.csr',
      '-subj',
      '/CN=localhost',
    ]);
    writeFileSync(
      join(dir, 'server.ext'),
      [
        'subjectAltName=DNS:localhost,IP:127.0.0.1',
        'basicConstraints=CA:FALSE',
        'keyUsage=critical,digitalSignature,keyEncipherment',
        // The nodes use the same certificate as clients (replication, cluster bus, sentinel links).
        'extendedKeyUsage=serverAuth,clientAuth',
        '',
      ].join('\n'),
    );
    openssl(dir, [
      'x509',
      '-req',
      '-in',
      'server.csr',
      '-CA',
      'ca.crt',
      '-CAkey',
      'ca.key',
      '-set_serial',
      String(Date.now()),
      '-days',
      '2',
      '-extfile',
      'server.ext',
      '-out',
      'server.crt',
    ]);
  }
  return { ...files, ca: readFileSync(files.caFile) };
}

function accessFor(opts: RedisAccessOptions, handleDir: string): NodeAccess {
  return {
    password: opts.password,
    plainToo: opts.plainToo,
    tls: opts.tls ? makeTlsFiles(opts.tls === true ? join(handleDir, 'tls') : opts.tls.dir) : undefined,
  };
}

/** How a data node listens: plain `--port P`, or TLS only on P (its replication and cluster bus too). */
function listenArgs(
  access: NodeAccess,
  port: number,
  cluster: boolean,
  plainPort: number | undefined,
): string[] {
  const tls = access.tls;
  if (!tls) return ['--port', String(port)];
  return [
    '--port',
    String(plainPort ?? 0),
    '--tls-port',
    String(port),
    '--tls-cert-file',
    tls.certFile,
    '--tls-key-file',
    tls.keyFile,
    '--tls-ca-cert-file',
    tls.caFile,
    '--tls-auth-clients',
    'no',
    '--tls-replication',
    'yes',
    ...(cluster ? ['--tls-cluster', 'yes'] : []),
  ];
}

/** The password clients need (requirepass) and the one a replica gives its master (masterauth). */
function authArgs(access: NodeAccess): string[] {
  return access.password ? ['--requirepass', access.password, '--masterauth', access.password] : [];
}

/**
 * A data node's arguments: listening (plain or TLS), credentials, the handle's directory, no persistence,
 * and full syncs started at once (7.0 waits 5 s for more replicas to share a diskless transfer).
 */
function dataNodeArgs(
  access: NodeAccess,
  port: number,
  cluster: boolean,
  dir: string,
  logFile: string,
  plainPort?: number,
): string[] {
  return [
    ...listenArgs(access, port, cluster, plainPort),
    ...authArgs(access),
    '--bind',
    HOST,
    '--dir',
    dir,
    '--logfile',
    logFile,
    '--save',
    '',
    '--appendonly',
    'no',
    '--repl-diskless-sync-delay',
    '0',
  ];
}

// ---------------------------------------------------------------------------------------------------------
// How long a failover may take, from the configuration (the constants are Redis 7.0's, cluster.c and
// sentinel.c). A test asserts its failover against these: slower means the setup does not do what it
// promises, and a client that waits longer than this for Redis is waiting for something else.

/**
 * Redis Cluster: a master is PFAIL to a peer once a ping to it goes unanswered for cluster-node-timeout,
 * and peers ping every node at least every node-timeout/2 (<= 1.5 x node-timeout); FAIL needs a majority
 * of masters to report it, gossiped at the same pace (+ 1.5 x node-timeout). Its replica then waits
 * 500 ms + up to 500 ms random + 1000 ms per rank (one replica: rank 0) and asks for votes, which it must
 * win within the auth timeout, max(2 x node-timeout, 2000 ms). The winner broadcasts its new config at
 * once; 1000 ms more for every node to have it. With the default node-timeout of 1500 ms:
 * 4500 + 1000 + 3000 + 1000 = 9500 ms.
 */
export function clusterFailoverBoundMs(nodeTimeoutMs: number): number {
  return 3 * nodeTimeoutMs + 1000 + Math.max(2 * nodeTimeoutMs, 2000) + 1000;
}

/**
 * Sentinel: a master is SDOWN after down-after-milliseconds without a valid reply, ODOWN once a quorum
 * agrees (asked every 1000 ms), the failover starts after up to 1000 ms of random desync, and the vote
 * must be won within failover-timeout (the election timeout is min(10 s, failover-timeout)). The promoted
 * replica's INFO is read every 1000 ms during a failover, and the other sentinels learn the new master
 * from hello messages every 2000 ms. With the defaults (1000 and 3000 ms): 1000 + 3000 + 5000 = 9000 ms.
 */
export function sentinelFailoverBoundMs(downAfterMs: number, failoverTimeoutMs: number): number {
  return downAfterMs + failoverTimeoutMs + 1000 + 1000 + 1000 + 2000;
}

// ---------------------------------------------------------------------------------------------------------
// Cluster

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
  const startedAt = Date.now();
  const masterCount = opts.masters ?? 3;
  const replicasPerMaster = opts.replicasPerMaster ?? 1;
  const nodeTimeoutMs = opts.nodeTimeoutMs ?? 1500;
  if (masterCount < 3)
    throw new Error(`startCluster: redis-cli needs at least 3 masters, got ${masterCount}`);
  const total = masterCount * (1 + replicasPerMaster);
  const dir = mkdtempSync(join(tmpdir(), 'lt-redis-cluster-'));
  liveDirs.add(dir);
  installSafetyNet();
  const procs = new Map<number, Proc>();
  let access: NodeAccess = {};
  const allLogs = () => [...procs.values()].map((p) => tail(p, 800)).join('\n');
  const live = () => [...procs.values()].filter(isAlive);
  /** Slots each killed master served at the moment of its death. */
  const slotsAtDeath = new Map<number, [number, number][]>();

  const stop = async () => {
    await Promise.all([...procs.values()].map((p) => killProc(p)));
    for (const p of procs.values()) {
      claimedPorts.delete(p.port);
      if (p.plainPort !== undefined) claimedPorts.delete(p.plainPort);
    }
    rmSync(dir, { recursive: true, force: true });
    liveDirs.delete(dir);
  };

  /** As started: every node up and ok, all slots served, every master with its replicas linked. */
  const waitHealthy = (timeoutMs: number) =>
    waitFor(
      `a healthy cluster of ${masterCount} masters with ${replicasPerMaster} replica(s) each`,
      timeoutMs,
      async () => {
        let masters = 0;
        for (const port of procs.keys()) {
          const ci = parseInfo(String(await command(access, port, 'CLUSTER', 'INFO')));
          if (ci.cluster_state !== 'ok' || Number(ci.cluster_known_nodes) !== total) return undefined;
          if (Number(ci.cluster_slots_ok) !== 16384) return undefined;
          const repl = await info(access, port, 'replication');
          if (repl.role === 'slave' && repl.master_link_status !== 'up') return undefined;
          if (repl.role === 'master') {
            masters++;
            if (Number(repl.connected_slaves) !== replicasPerMaster) return undefined;
          }
        }
        return masters === masterCount ? true : undefined;
      },
      allLogs,
    );

  try {
    access = accessFor(opts, dir);
    const started = await Promise.all(
      Array.from({ length: total }, () =>
        spawnRedis(
          dir,
          true,
          (port, logFile, plainPort) => [
            ...dataNodeArgs(access, port, true, dir, logFile, plainPort),
            '--cluster-enabled',
            'yes',
            '--cluster-config-file',
            join(dir, `nodes-${port}.conf`),
            '--cluster-node-timeout',
            String(nodeTimeoutMs),
            // 0: a replica fails over however long it has been disconnected from its master.
            '--cluster-replica-validity-factor',
            '0',
            '--cluster-allow-reads-when-down',
            'no',
          ],
          'a cluster node',
          access,
        ).then((p) => {
          procs.set(p.port, p);
          return p;
        }),
      ),
    );
    const ports = started.map((p) => p.port);
    const created = await runRedisCli(
      access,
      [
        '--cluster',
        'create',
        ...ports.map((p) => `${HOST}:${p}`),
        '--cluster-replicas',
        String(replicasPerMaster),
        '--cluster-yes',
      ],
      UP_TIMEOUT_MS,
    ).catch((err: Error) => {
      throw new Error(`${err.message}\n${allLogs()}`);
    });
    if (!/All 16384 slots covered/.test(created)) {
      throw new Error(`redis-cli --cluster create did not cover every slot:\n${created}\n${allLogs()}`);
    }
    await waitHealthy(UP_TIMEOUT_MS);
  } catch (err) {
    await stop();
    throw err;
  }

  /** What one live node says about itself. */
  const self = async (port: number): Promise<ClusterNodeLine | undefined> =>
    parseClusterNodes(String(await command(access, port, 'CLUSTER', 'NODES'))).find((n) =>
      n.flags.includes('myself'),
    );

  const masters = async (): Promise<number[]> => {
    const out: number[] = [];
    for (const p of live()) {
      const me = await self(p.port);
      if (me?.flags.includes('master') && me.slots.length > 0) out.push(p.port);
    }
    return out.sort((a, b) => a - b);
  };

  const masterOf = async (key: string): Promise<number> => {
    const anyLive = live()[0];
    if (!anyLive) throw new Error('masterOf: no node of the cluster is alive');
    const slot = Number(await command(access, anyLive.port, 'CLUSTER', 'KEYSLOT', key));
    // The authority on a slot is the live master that claims it for itself.
    const owners: number[] = [];
    for (const p of live()) {
      const me = await self(p.port);
      if (me?.flags.includes('master') && ownsSlot(me, slot)) owners.push(p.port);
    }
    if (owners.length !== 1) {
      throw new Error(
        `masterOf(${key}): slot ${slot} is claimed by ${owners.length} live masters (${owners.join(', ')})`,
      );
    }
    return owners[0] as number;
  };

  const handle: RedisClusterHandle = {
    seeds: [...procs.keys()].map((p) => `${HOST}:${p}`).join(','),
    plainSeeds:
      access.tls && access.plainToo
        ? [...procs.values()].map((p) => `${HOST}:${p.plainPort}`).join(',')
        : undefined,
    get nodes() {
      return [...procs.values()].map((p) => ({ port: p.port, plainPort: p.plainPort, pid: p.pid }));
    },
    nodeTimeoutMs,
    failoverBoundMs: clusterFailoverBoundMs(nodeTimeoutMs),
    dir,
    setupMs: Date.now() - startedAt,
    password: access.password,
    tls: access.tls,
    masters,
    masterOf,
    async killNode(port) {
      const proc = procs.get(port);
      if (!proc) throw new Error(`killNode(${port}): not a node of this cluster`);
      if (!isAlive(proc)) throw new Error(`killNode(${port}): already dead`);
      const me = await self(port).catch(() => undefined);
      slotsAtDeath.set(port, me?.flags.includes('master') ? me.slots : []);
      await killProc(proc);
    },
    async waitForFailover(deadPort, timeoutMs = 30_000) {
      const proc = procs.get(deadPort);
      const slots = slotsAtDeath.get(deadPort);
      if (!proc || proc.killedAt === undefined || !slots) {
        throw new Error(`waitForFailover(${deadPort}): that node was not killed with killNode()`);
      }
      const probeSlot = slots[0]?.[0];
      if (probeSlot === undefined) {
        throw new Error(`waitForFailover(${deadPort}): it served no slot when killed (a replica?)`);
      }
      const killedAt = proc.killedAt;
      const newMasterPort = await waitFor(
        `a replica to take over the slots of ${HOST}:${deadPort}`,
        timeoutMs,
        async () => {
          let owner: number | undefined;
          for (const p of live()) {
            const ci = parseInfo(String(await command(access, p.port, 'CLUSTER', 'INFO')));
            if (ci.cluster_state !== 'ok') return undefined;
            const view = parseClusterNodes(String(await command(access, p.port, 'CLUSTER', 'NODES')));
            // Every live node must route the dead master's first slot to the same live master.
            const byView = view.find(
              (n) => n.flags.includes('master') && !n.flags.includes('fail') && ownsSlot(n, probeSlot),
            );
            if (!byView || byView.port === deadPort) return undefined;
            if (owner !== undefined && owner !== byView.port) return undefined;
            owner = byView.port;
          }
          if (owner === undefined) return undefined;
          const me = await self(owner);
          if (!me?.flags.includes('master')) return undefined;
          for (const [a, b] of slots) if (!ownsSlot(me, a) || !ownsSlot(me, b)) return undefined;
          return owner;
        },
        allLogs,
        50,
      );
      return { newMasterPort, ms: Date.now() - killedAt, killedAt };
    },
    async waitForReplication(timeoutMs = 10_000) {
      await waitFor(
        'every replica to catch up with its master',
        timeoutMs,
        async () => {
          for (const port of await masters()) if (!(await replicasCaughtUp(access, port))) return undefined;
          return true;
        },
        allLogs,
        50,
      );
    },
    async heal(timeoutMs = 30_000) {
      for (const [port, proc] of procs) {
        if (isAlive(proc)) continue;
        procs.set(port, await relaunch(proc, 'a restarted cluster node', access));
        slotsAtDeath.delete(port);
      }
      await waitHealthy(timeoutMs);
    },
    async allKeys(pattern = '*') {
      const keys: string[] = [];
      for (const port of await masters()) keys.push(...(await scanAll(access, port, pattern)));
      return keys.sort();
    },
    logTail(port) {
      const proc = procs.get(port);
      return proc ? tail(proc) : `(no node on port ${port})`;
    },
    stop,
  };
  return handle;
}

// ---------------------------------------------------------------------------------------------------------
// Sentinel

function pairsToRecord(flat: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (!Array.isArray(flat)) return out;
  for (let i = 0; i + 1 < flat.length; i += 2) out[String(flat[i])] = String(flat[i + 1]);
  return out;
}

export async function startSentinel(opts: RedisSentinelOptions = {}): Promise<RedisSentinelHandle> {
  const startedAt = Date.now();
  const masterName = opts.masterName ?? 'ltmaster';
  const replicaCount = opts.replicas ?? 1;
  const sentinelCount = opts.sentinels ?? 3;
  const downAfterMs = opts.downAfterMs ?? 1000;
  const failoverTimeoutMs = opts.failoverTimeoutMs ?? 3000;
  const quorum = Math.floor(sentinelCount / 2) + 1;
  const dir = mkdtempSync(join(tmpdir(), 'lt-redis-sentinel-'));
  liveDirs.add(dir);
  installSafetyNet();
  const data = new Map<number, Proc>();
  let access: NodeAccess = {};
  let sentinelAccess: NodeAccess = {};
  const sents = new Map<number, Proc>();
  const all = () => [...data.values(), ...sents.values()];
  const allLogs = () =>
    all()
      .map((p) => tail(p, 800))
      .join('\n');

  const stop = async () => {
    await Promise.all(all().map((p) => killProc(p)));
    for (const p of all()) {
      claimedPorts.delete(p.port);
      if (p.plainPort !== undefined) claimedPorts.delete(p.plainPort);
    }
    rmSync(dir, { recursive: true, force: true });
    liveDirs.delete(dir);
  };

  const dataArgs = (extra: string[]) => (port: number, logFile: string, plainPort?: number) => [
    ...dataNodeArgs(access, port, false, dir, logFile, plainPort),
    ...extra,
  ];

  try {
    access = accessFor(opts, dir);
    sentinelAccess = { password: opts.sentinelPassword, tls: access.tls };
    const master = await spawnRedis(dir, false, dataArgs([]), 'the sentinel master', access);
    data.set(master.port, master);
    const replicas = await Promise.all(
      Array.from({ length: replicaCount }, () =>
        spawnRedis(
          dir,
          false,
          dataArgs(['--replicaof', HOST, String(master.port)]),
          'a replica',
          access,
        ).then((p) => {
          data.set(p.port, p);
          return p;
        }),
      ),
    );
    await waitFor(
      'the replicas to sync with the master',
      UP_TIMEOUT_MS,
      async () => {
        for (const r of replicas) {
          if ((await info(access, r.port, 'replication')).master_link_status !== 'up') return undefined;
        }
        return true;
      },
      allLogs,
    );
    await Promise.all(
      Array.from({ length: sentinelCount }, () =>
        spawnRedis(
          dir,
          false,
          (port, logFile) => {
            // Sentinel rewrites its config file: one writable file per sentinel, by absolute path.
            const file = join(dir, `sentinel-${port}.conf`);
            const tls = access.tls;
            writeFileSync(
              file,
              [
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
                ...(opts.sentinelPassword ? [`requirepass ${opts.sentinelPassword}`] : []),
                `bind ${HOST}`,
                `dir ${dir}`,
                `logfile ${logFile}`,
                'sentinel resolve-hostnames no',
                `sentinel monitor ${masterName} ${HOST} ${master.port} ${quorum}`,
                `sentinel down-after-milliseconds ${masterName} ${downAfterMs}`,
                `sentinel failover-timeout ${masterName} ${failoverTimeoutMs}`,
                `sentinel parallel-syncs ${masterName} 1`,
                ...(access.password ? [`sentinel auth-pass ${masterName} ${access.password}`] : []),
                '',
              ].join('\n'),
            );
            return [file, '--sentinel'];
          },
          'a sentinel',
          sentinelAccess,
        ).then((p) => {
          sents.set(p.port, p);
          return p;
        }),
      ),
    );
    await waitFor(
      `every sentinel to know the master, its ${replicaCount} replica(s) and the other sentinels`,
      UP_TIMEOUT_MS,
      async () => {
        for (const port of sents.keys()) {
          const addr = (await command(
            sentinelAccess,
            port,
            'SENTINEL',
            'GET-MASTER-ADDR-BY-NAME',
            masterName,
          )) as string[];
          if (Number(addr?.[1]) !== master.port) return undefined;
          const others = (await command(
            sentinelAccess,
            port,
            'SENTINEL',
            'SENTINELS',
            masterName,
          )) as unknown[];
          if (others.length !== sentinelCount - 1) return undefined;
          const reps = (
            (await command(sentinelAccess, port, 'SENTINEL', 'REPLICAS', masterName)) as unknown[]
          ).map(pairsToRecord);
          const ok = reps.filter((r) => !/s_down|o_down|disconnected/.test(r.flags ?? ''));
          if (ok.length !== replicaCount) return undefined;
        }
        return true;
      },
      allLogs,
    );
  } catch (err) {
    await stop();
    throw err;
  }

  const liveSentinels = () => [...sents.values()].filter(isAlive);

  const masterPort = async (): Promise<number> => {
    let lastErr: unknown;
    for (const s of liveSentinels()) {
      try {
        const addr = (await command(
          sentinelAccess,
          s.port,
          'SENTINEL',
          'GET-MASTER-ADDR-BY-NAME',
          masterName,
        )) as string[];
        const port = Number(addr?.[1]);
        if (Number.isInteger(port) && port > 0) return port;
      } catch (err) {
        lastErr = err;
      }
    }
    throw new Error(`no sentinel named a master for ${masterName}: ${(lastErr as Error)?.message ?? ''}`);
  };

  const replicaPorts = async (): Promise<number[]> => {
    const s = liveSentinels()[0];
    if (!s) throw new Error('replicaPorts: no sentinel is alive');
    const reps = (
      (await command(sentinelAccess, s.port, 'SENTINEL', 'REPLICAS', masterName)) as unknown[]
    ).map(pairsToRecord);
    return reps
      .filter((r) => !/s_down|o_down|disconnected/.test(r.flags ?? ''))
      .map((r) => Number(r.port))
      .sort((a, b) => a - b);
  };

  /** As started: every sentinel names one live master, which has all its replicas, in sync. */
  const waitHealthy = (timeoutMs: number) =>
    waitFor(
      `every sentinel to name one master with its ${replicaCount} replica(s) in sync`,
      timeoutMs,
      async () => {
        let agreed: number | undefined;
        for (const port of sents.keys()) {
          const m = pairsToRecord(await command(sentinelAccess, port, 'SENTINEL', 'MASTER', masterName));
          if (m.flags !== 'master') return undefined;
          const p = Number(m.port);
          if (agreed !== undefined && agreed !== p) return undefined;
          agreed = p;
          const reps = (
            (await command(sentinelAccess, port, 'SENTINEL', 'REPLICAS', masterName)) as unknown[]
          ).map(pairsToRecord);
          const ok = reps.filter((r) => r.flags === 'slave' && r['master-link-status'] === 'ok');
          if (ok.length !== replicaCount) return undefined;
        }
        if (agreed === undefined || !data.get(agreed) || !isAlive(data.get(agreed) as Proc)) return undefined;
        const repl = await info(access, agreed, 'replication');
        if (repl.role !== 'master' || Number(repl.connected_slaves) !== replicaCount) return undefined;
        return (await replicasCaughtUp(access, agreed)) ? true : undefined;
      },
      allLogs,
      50,
    );

  const handle: RedisSentinelHandle = {
    sentinels: [...sents.keys()].map((p) => `${HOST}:${p}`).join(','),
    sentinelPorts: [...sents.keys()],
    masterName,
    get nodes() {
      return all().map((p) => ({ port: p.port, plainPort: p.plainPort, pid: p.pid }));
    },
    downAfterMs,
    failoverTimeoutMs,
    failoverBoundMs: sentinelFailoverBoundMs(downAfterMs, failoverTimeoutMs),
    dir,
    setupMs: Date.now() - startedAt,
    password: access.password,
    sentinelPassword: opts.sentinelPassword,
    tls: access.tls,
    masterPort,
    replicaPorts,
    async killMaster() {
      const port = await masterPort();
      const proc = data.get(port);
      if (!proc)
        throw new Error(`killMaster: the sentinels name port ${port}, which this handle did not start`);
      if (!isAlive(proc)) throw new Error(`killMaster: the master on ${port} is already dead`);
      await killProc(proc);
      return port;
    },
    async waitForFailover(oldPort, timeoutMs = 30_000) {
      const proc = data.get(oldPort);
      if (!proc || proc.killedAt === undefined) {
        throw new Error(`waitForFailover(${oldPort}): that master was not killed with killMaster()`);
      }
      const killedAt = proc.killedAt;
      const newMasterPort = await waitFor(
        `the sentinels to promote a replica of ${HOST}:${oldPort}`,
        timeoutMs,
        async () => {
          let agreed: number | undefined;
          for (const s of liveSentinels()) {
            const addr = (await command(
              sentinelAccess,
              s.port,
              'SENTINEL',
              'GET-MASTER-ADDR-BY-NAME',
              masterName,
            )) as string[];
            const port = Number(addr?.[1]);
            if (port === oldPort || (agreed !== undefined && agreed !== port)) return undefined;
            agreed = port;
          }
          if (agreed === undefined) return undefined;
          const repl = await info(access, agreed, 'replication');
          return repl.role === 'master' ? agreed : undefined;
        },
        allLogs,
        50,
      );
      return { newMasterPort, ms: Date.now() - killedAt, killedAt };
    },
    async waitForReplication(timeoutMs = 10_000) {
      await waitFor(
        'every replica to catch up with the master',
        timeoutMs,
        async () => ((await replicasCaughtUp(access, await masterPort())) ? true : undefined),
        allLogs,
        50,
      );
    },
    async heal(timeoutMs = 30_000) {
      const dead = [...data.values()].filter((p) => !isAlive(p));
      if (dead.length > 0) {
        // As a replica of the master the sentinels name now: started as it was (a master), it would
        // serve an empty dataset until a sentinel converts it, which it does only after 8 s.
        const master = await masterPort();
        for (const proc of dead) {
          data.set(
            proc.port,
            await relaunch(proc, 'a restarted data node', access, ['--replicaof', HOST, String(master)]),
          );
        }
      }
      await waitHealthy(timeoutMs);
    },
    async allKeys(pattern = '*') {
      return (await scanAll(access, await masterPort(), pattern)).sort();
    },
    logTail(port) {
      const proc = data.get(port) ?? sents.get(port);
      return proc ? tail(proc) : `(no process on port ${port})`;
    },
    stop,
  };
  return handle;
}

// ---------------------------------------------------------------------------------------------------------
// One server, with credentials and TLS (startOwnRedis in redis-server.ts has neither)

export interface RedisStandaloneHandle {
  port: number;
  /** The REDIS_URL for it: rediss:// with TLS, the password in it when there is one. */
  url: string;
  /** With `plainToo`: its plain-text port, and the redis:// URL of it (with the password). */
  plainPort?: number | undefined;
  plainUrl?: string | undefined;
  nodes: HaNode[];
  dir: string;
  setupMs: number;
  password?: string | undefined;
  tls?: TlsFiles | undefined;
  logTail(): string;
  stop(): Promise<void>;
}

export async function startStandalone(opts: RedisAccessOptions = {}): Promise<RedisStandaloneHandle> {
  const startedAt = Date.now();
  const dir = mkdtempSync(join(tmpdir(), 'lt-redis-standalone-'));
  liveDirs.add(dir);
  installSafetyNet();
  let proc: Proc | undefined;
  const stop = async () => {
    if (proc) {
      await killProc(proc);
      claimedPorts.delete(proc.port);
      if (proc.plainPort !== undefined) claimedPorts.delete(proc.plainPort);
    }
    rmSync(dir, { recursive: true, force: true });
    liveDirs.delete(dir);
  };
  let access: NodeAccess = {};
  try {
    access = accessFor(opts, dir);
    proc = await spawnRedis(
      dir,
      false,
      (port, logFile, plainPort) => dataNodeArgs(access, port, false, dir, logFile, plainPort),
      'a standalone server',
      access,
    );
  } catch (err) {
    await stop();
    throw err;
  }
  const p = proc;
  const auth = access.password ? `:${encodeURIComponent(access.password)}@` : '';
  return {
    port: p.port,
    url: `${access.tls ? 'rediss' : 'redis'}://${auth}${HOST}:${p.port}`,
    plainPort: p.plainPort,
    plainUrl: p.plainPort === undefined ? undefined : `redis://${auth}${HOST}:${p.plainPort}`,
    nodes: [{ port: p.port, plainPort: p.plainPort, pid: p.pid }],
    dir,
    setupMs: Date.now() - startedAt,
    password: access.password,
    tls: access.tls,
    logTail: () => tail(p),
    stop,
  };
}
