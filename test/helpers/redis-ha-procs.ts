// The processes of the test topologies (redis-ha.ts): free ports, redis-server started and restarted by pid,
// admin commands to one node, waits that throw with the nodes' logs, and the safety net that kills what a
// crashed test left behind.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { scanKeys } from '../../src/redis/client.ts';
import type { NodeAccess } from './redis-ha-types.ts';
import { requireRedisServer } from './redis-server.ts';

export const HOST = '127.0.0.1';
/** How long anything may take to come up before we throw. */
export const UP_TIMEOUT_MS = 20_000;
// Cluster ports: a node's bus listens on port + 10000, which must be a valid port too.
const PORT_MIN = 30_000;
const PORT_MAX = 55_535;
const BUS_OFFSET = 10_000;

// ---------------------------------------------------------------------------------------------------------
// Processes, and the safety net for the ones a crashed test leaves behind

export interface Proc {
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
export const liveDirs = new Set<string>();
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

export function installSafetyNet(): void {
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

export function tail(proc: Proc, chars = 1500): string {
  let text = proc.stderr;
  try {
    if (existsSync(proc.logFile)) text = readFileSync(proc.logFile, 'utf8') + text;
  } catch {
    // unreadable: the stderr we have is all there is
  }
  text = text.slice(-chars).trimEnd();
  return `--- log of ${HOST}:${proc.port} (pid ${proc.pid}) ---\n${text || '(empty)'}`;
}

export function isAlive(proc: Proc): boolean {
  return proc.child.exitCode === null && proc.child.signalCode === null;
}

export async function killProc(proc: Proc, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
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

export const claimedPorts = new Set<number>();

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

export async function command(
  access: NodeAccess,
  port: number,
  ...args: (string | number)[]
): Promise<unknown> {
  return withNode(access, port, (r) => r.call(String(args[0]), ...args.slice(1)));
}

export async function info(
  access: NodeAccess,
  port: number,
  section: string,
): Promise<Record<string, string>> {
  return parseInfo(String(await command(access, port, 'INFO', section)));
}

export function parseInfo(text: string): Record<string, string> {
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
export async function spawnRedis(
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
export async function relaunch(
  proc: Proc,
  what: string,
  access: NodeAccess,
  extra: string[] = [],
): Promise<Proc> {
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
export async function waitFor<T>(
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

export async function scanAll(access: NodeAccess, port: number, pattern: string): Promise<string[]> {
  return withNode(access, port, async (r) => {
    const out: string[] = [];
    for await (const keys of scanKeys(r, pattern)) out.push(...keys);
    return out;
  });
}

/** Every replica of the master on `port` has acknowledged the master's replication offset. */
export async function replicasCaughtUp(access: NodeAccess, port: number): Promise<boolean> {
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
export function runRedisCli(access: NodeAccess, args: string[], timeoutMs: number): Promise<string> {
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

/** Kills every process of a topology by pid, frees their ports and removes its directory. */
export async function stopAll(procs: Proc[], dir: string): Promise<void> {
  await Promise.all(procs.map((p) => killProc(p)));
  for (const p of procs) {
    claimedPorts.delete(p.port);
    if (p.plainPort !== undefined) claimedPorts.delete(p.plainPort);
  }
  rmSync(dir, { recursive: true, force: true });
  liveDirs.delete(dir);
}

/** A topology's own temporary directory, removed by the safety net if the test dies before stop(). */
export function topologyDir(kind: string): string {
  const dir = mkdtempSync(join(tmpdir(), `lt-redis-${kind}-`));
  liveDirs.add(dir);
  installSafetyNet();
  return dir;
}
