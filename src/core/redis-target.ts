// Which Redis the tool talks to: one server (REDIS_URL), a Cluster (REDIS_CLUSTER_NODES) or
// Sentinel (REDIS_SENTINELS + REDIS_SENTINEL_MASTER). Messages never show a password.

export interface HostPort {
  host: string;
  port: number;
}

/** Credentials and TLS shared by the cluster and Sentinel modes (a REDIS_URL carries its own). */
export interface RedisAuth {
  username?: string | undefined;
  /** Not enumerable: JSON.stringify or a log of the target never carries it. */
  readonly password?: string | undefined;
  /** TLS to the data nodes (REDIS_TLS), with an optional private CA (REDIS_TLS_CA). */
  tls: boolean;
  tlsCaFile?: string | undefined;
}

export type RedisTarget =
  | ({ mode: 'standalone'; url: string } & RedisAuth)
  | ({ mode: 'cluster'; nodes: HostPort[] } & RedisAuth)
  | ({
      mode: 'sentinel';
      sentinels: HostPort[];
      /** The master's name in the sentinels' configuration (`sentinel monitor NAME ...`). */
      masterName: string;
      /** REDIS_SENTINEL_PASSWORD: the sentinels' own password, when they have one. */
      readonly sentinelPassword?: string | undefined;
    } & RedisAuth);

export interface RedisTargetEnv {
  REDIS_URL: string;
  REDIS_CLUSTER_NODES?: string | undefined;
  REDIS_SENTINELS?: string | undefined;
  REDIS_SENTINEL_MASTER?: string | undefined;
  REDIS_USERNAME?: string | undefined;
  REDIS_PASSWORD?: string | undefined;
  REDIS_SENTINEL_PASSWORD?: string | undefined;
  REDIS_TLS?: boolean | undefined;
  REDIS_TLS_CA?: string | undefined;
}

/** A value for a message: shown unless it could hold a credential (an `@`, as in user:pw@host). */
function shownList(name: string, value: string): string {
  return value.includes('@')
    ? `${name} (the value is not shown: it looks like it holds credentials; give them in REDIS_USERNAME / REDIS_PASSWORD)`
    : `${name}: got '${value.slice(0, 200)}'`;
}

/** Parses `host:port,host:port`; returns the problem as text when it cannot. */
export function parseHostPorts(name: string, value: string): HostPort[] | string {
  const parts = value
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p.length > 0);
  if (parts.length === 0) return `${shownList(name, value)}: expected host:port[,host:port...]`;
  const out: HostPort[] = [];
  for (const part of parts) {
    // [::1]:7000 for IPv6, host:port otherwise.
    const m = /^(?:\[([^\]]+)\]|([^:@/\s]+)):(\d{1,5})$/.exec(part);
    const port = m ? Number(m[3]) : NaN;
    if (!m || !(port >= 1 && port <= 65535)) {
      return `${shownList(name, value)}: expected host:port[,host:port...] (entry '${part.includes('@') ? '***' : part}' is not host:port)`;
    }
    out.push({ host: (m[1] ?? m[2]) as string, port });
  }
  return out;
}

/**
 * The target the environment selects: a cluster or Sentinel wins over REDIS_URL; both is an
 * error.
 */
export function redisTargetFrom(env: RedisTargetEnv, problems: string[]): RedisTarget | undefined {
  const auth: RedisAuth = {
    username: env.REDIS_USERNAME,
    tls: env.REDIS_TLS ?? false,
    tlsCaFile: env.REDIS_TLS_CA,
  };
  Object.defineProperty(auth, 'password', { value: env.REDIS_PASSWORD, enumerable: false });
  if (env.REDIS_CLUSTER_NODES && env.REDIS_SENTINELS) {
    problems.push(
      'REDIS_CLUSTER_NODES, REDIS_SENTINELS: set one of them (a Redis Cluster or a Sentinel setup), not both',
    );
    return undefined;
  }
  if (env.REDIS_CLUSTER_NODES) {
    const nodes = parseHostPorts('REDIS_CLUSTER_NODES', env.REDIS_CLUSTER_NODES);
    if (typeof nodes === 'string') {
      problems.push(nodes);
      return undefined;
    }
    return withAuth({ mode: 'cluster' as const, nodes }, auth);
  }
  if (env.REDIS_SENTINELS || env.REDIS_SENTINEL_MASTER) {
    if (!env.REDIS_SENTINELS) {
      problems.push(
        'REDIS_SENTINELS: required with REDIS_SENTINEL_MASTER (the sentinels, as host:port,host:port)',
      );
      return undefined;
    }
    const sentinels = parseHostPorts('REDIS_SENTINELS', env.REDIS_SENTINELS);
    if (typeof sentinels === 'string') {
      problems.push(sentinels);
      return undefined;
    }
    if (!env.REDIS_SENTINEL_MASTER || !/^[A-Za-z0-9_.-]{1,128}$/.test(env.REDIS_SENTINEL_MASTER)) {
      problems.push(
        env.REDIS_SENTINEL_MASTER
          ? `REDIS_SENTINEL_MASTER: expected the master's name as the sentinels know it (letters, digits, _ . -), got '${env.REDIS_SENTINEL_MASTER.slice(0, 200)}'`
          : 'REDIS_SENTINEL_MASTER: required with REDIS_SENTINELS (the master name in `sentinel monitor NAME ...`)',
      );
      return undefined;
    }
    const target = withAuth(
      { mode: 'sentinel' as const, sentinels, masterName: env.REDIS_SENTINEL_MASTER },
      auth,
    );
    Object.defineProperty(target, 'sentinelPassword', {
      value: env.REDIS_SENTINEL_PASSWORD,
      enumerable: false,
    });
    return target;
  }
  return withAuth({ mode: 'standalone' as const, url: env.REDIS_URL }, auth);
}

function withAuth<T extends object>(base: T, auth: RedisAuth): T & RedisAuth {
  const out = { ...base, username: auth.username, tls: auth.tls, tlsCaFile: auth.tlsCaFile } as T & RedisAuth;
  Object.defineProperty(out, 'password', { value: auth.password, enumerable: false });
  return out;
}

/** The URL without a password, for messages. */
export function safeRedisUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparseable REDIS_URL)';
  }
}

/** The target in words, for logs and errors: never a password. */
export function describeRedis(target: RedisTarget): string {
  const list = (l: HostPort[]) =>
    l.map((n) => (n.host.includes(':') ? `[${n.host}]:${n.port}` : `${n.host}:${n.port}`)).join(',');
  switch (target.mode) {
    case 'standalone':
      return safeRedisUrl(target.url);
    case 'cluster':
      return `Redis Cluster (REDIS_CLUSTER_NODES ${list(target.nodes)})${target.tls ? ' over TLS' : ''}`;
    case 'sentinel':
      return `Redis master '${target.masterName}' via Sentinel (REDIS_SENTINELS ${list(target.sentinels)})${target.tls ? ' over TLS' : ''}`;
  }
}

/** The variable an operator changes to point the tool elsewhere, for hints in errors. */
export function redisVariable(target: RedisTarget): string {
  return target.mode === 'cluster'
    ? 'REDIS_CLUSTER_NODES'
    : target.mode === 'sentinel'
      ? 'REDIS_SENTINELS'
      : 'REDIS_URL';
}

/** A standalone target from a URL (tests, the demo's throwaway Redis). */
export function standaloneTarget(url: string): RedisTarget {
  return { mode: 'standalone', url, tls: false };
}
