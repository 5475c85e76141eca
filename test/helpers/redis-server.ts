// A redis-server of a test's own, on its own free port and data directory, for faults the shared Redis
// must not suffer (restart, eviction policy, a crash, a freeze). Started from PATH; a missing binary fails
// the test loudly.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { freePort } from '../../src/demo/throwaway-redis.ts';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { track } from './children.ts';

export interface OwnRedis {
  port: number;
  url: string;
  dir: string;
  /** Stops the server (SIGTERM: it writes its AOF) and starts it again on the same port and directory. */
  restart(downMs?: number): Promise<void>;
  stop(): Promise<void>;
  /** Stops it for good and removes its directory. */
  close(): Promise<void>;
  /** Kills it (SIGKILL: no AOF rewrite, no goodbye) and waits for the exit; start() brings it back. */
  crash(): Promise<void>;
  /** Starts it again on the same port and directory after stop() or crash() (it loads its AOF). */
  start(): Promise<void>;
  /** SIGSTOP (true) or SIGCONT (false): a frozen server keeps its sockets open and answers nothing. */
  freeze(frozen: boolean): void;
  /** Whether a server process is running (possibly frozen). */
  readonly running: boolean;
}

export { freePort };

export function requireRedisServer(): void {
  const probe = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) {
    throw new Error(
      `these tests start their own redis-server and none is on PATH (${probe.error?.message ?? probe.stderr}); ` +
        'install the redis-server package',
    );
  }
}

async function waitReady(url: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
    r.on('error', () => {}); // not up yet: connect() rejects, and we try again
    try {
      await r.connect();
      // Loading the AOF answers LOADING until done.
      if ((await r.ping()) === 'PONG') return;
    } catch {
      if (Date.now() > deadline)
        throw new Error(`own redis-server at ${url} did not answer in ${timeoutMs} ms`);
    } finally {
      r.disconnect();
    }
    await sleep(50);
  }
}

export async function startOwnRedis(extraArgs: string[] = [], fixedPort?: number): Promise<OwnRedis> {
  requireRedisServer();
  const port = fixedPort ?? (await freePort());
  const dir = mkdtempSync(join(tmpdir(), 'lt-own-redis-'));
  const url = `redis://127.0.0.1:${port}`;
  let child: ChildProcess | undefined;
  let log = '';
  const start = async () => {
    child = spawn(
      'redis-server',
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--dir',
        dir,
        '--appendonly',
        'yes',
        '--save',
        '',
      ].concat(extraArgs),
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const started = child;
    // A test that fails or times out must not leave a server running (children.ts kills it after the file).
    track(started);
    child.stdout?.on('data', (d: Buffer) => (log = (log + d.toString()).slice(-4000)));
    child.stderr?.on('data', (d: Buffer) => (log = (log + d.toString()).slice(-4000)));
    try {
      await waitReady(url, 10_000);
    } catch (err) {
      throw new Error(`${(err as Error).message}\n${log}`);
    }
  };
  const alive = (c: ChildProcess | undefined): c is ChildProcess =>
    c !== undefined && c.exitCode === null && c.signalCode === null;
  const stop = async (signal: NodeJS.Signals = 'SIGTERM') => {
    const c = child;
    child = undefined;
    if (!alive(c)) return;
    const exited = new Promise<void>((resolve) => c.once('exit', () => resolve()));
    // A frozen server would hold SIGTERM until it runs again.
    c.kill('SIGCONT');
    c.kill(signal);
    const timer = setTimeout(() => c.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  };
  await start();
  return {
    port,
    url,
    dir,
    async restart(downMs = 0) {
      await stop();
      await sleep(downMs);
      await start();
    },
    stop: () => stop(),
    async close() {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
    crash: () => stop('SIGKILL'),
    async start() {
      if (!alive(child)) await start();
    },
    freeze(frozen) {
      if (alive(child)) child.kill(frozen ? 'SIGSTOP' : 'SIGCONT');
    },
    get running() {
      return alive(child);
    },
  };
}
