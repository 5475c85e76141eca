// Credentials and TLS for the test topologies (redis-ha.ts): a throwaway CA made with openssl, a node's
// listening, password and persistence arguments, and how long a failover may take with a configuration.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { HOST } from './redis-ha-procs.ts';
import type { NodeAccess, RedisAccessOptions, TlsFiles } from './redis-ha-types.ts';

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

export function accessFor(opts: RedisAccessOptions, handleDir: string): NodeAccess {
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
export function dataNodeArgs(
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
