// One Redis server for tests, with credentials and TLS (startOwnRedis in redis-server.ts has neither).
import { accessFor, dataNodeArgs } from './redis-ha-access.ts';
import { HOST, spawnRedis, stopAll, tail, topologyDir, type Proc } from './redis-ha-procs.ts';
import type { NodeAccess, RedisAccessOptions, RedisStandaloneHandle } from './redis-ha-types.ts';

export async function startStandalone(opts: RedisAccessOptions = {}): Promise<RedisStandaloneHandle> {
  const startedAt = Date.now();
  const dir = topologyDir('standalone');
  let proc: Proc | undefined;
  const stop = () => stopAll(proc ? [proc] : [], dir);
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
