// Redis connections (core/redis-target.ts): a clear error when Redis does not answer at start,
// and warnings when it could evict queued jobs or keeps nothing on disk.
import { readFileSync } from 'node:fs';
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import { LearnerTransferError } from '../core/errors.ts';
import { isWriteRefusal } from './refusals.ts';
import type { Logger } from '../core/log.ts';
import { LogThrottle } from '../core/log-throttle.ts';
import { humanizeMs } from '../core/duration.ts';
import { describeRedis, redisVariable, safeRedisUrl, type RedisTarget } from '../core/redis-target.ts';
import { permissionDenial, permissionError, redisUser } from './permission-denial.ts';

export { safeRedisUrl, describeRedis };

/** A connection in any mode: BullMQ and our scripts take either. */
export type RedisClient = Redis | Cluster;

export function isCluster(redis: RedisClient): redis is Cluster {
  return (redis as { isCluster?: boolean }).isCluster === true;
}

/** READONLY: the node we write to was demoted by a failover; reconnect to find the master. */
function reconnectOnReadonly(err: Error): boolean | 1 | 2 {
  return err.message.startsWith('READONLY') ? 2 : false;
}

function tlsOptions(target: RedisTarget): RedisOptions['tls'] {
  if (!target.tls && !target.tlsCaFile) return undefined;
  if (!target.tlsCaFile) return {};
  try {
    return { ca: readFileSync(target.tlsCaFile) };
  } catch (err) {
    throw new LearnerTransferError(
      'LT_CONFIG_INVALID',
      `REDIS_TLS_CA: cannot read ${target.tlsCaFile} (${(err as { code?: string }).code ?? 'error'})`,
    );
  }
}

/**
 * A connection for BullMQ and our scripts: maxRetriesPerRequest null (BullMQ's requirement:
 * commands wait through a restart or a failover), with a capped backoff.
 */
export function createRedis(target: RedisTarget, name = 'learner-transfer'): RedisClient {
  const common: RedisOptions = {
    maxRetriesPerRequest: null,
    enableReadyCheck: true,
    connectionName: name,
    // ioredis 5.8.2+ may send the ready check's INFO after a subscriber's SUBSCRIBE when CLIENT
    // SETINFO is in between (redis/ioredis#2037): not worth a library name in CLIENT LIST.
    disableClientInfo: true,
    retryStrategy: (times) => Math.min(times * 200, 2000),
    reconnectOnError: reconnectOnReadonly,
    ...(target.username ? { username: target.username } : {}),
    ...(target.password ? { password: target.password } : {}),
  };
  const tls = tlsOptions(target);
  switch (target.mode) {
    case 'standalone': {
      // A rediss:// URL turns TLS on by itself; REDIS_TLS_CA adds a private CA to it.
      return new Redis(target.url, { ...common, ...(tls ? { tls } : {}) });
    }
    case 'cluster':
      return new Cluster(target.nodes, {
        redisOptions: { ...common, ...(tls ? { tls } : {}) },
        // Reads go to masters too: a replica may lag behind the limiter's log.
        scaleReads: 'master',
        clusterRetryStrategy: (times) => Math.min(times * 200, 2000),
        // A failover takes a few seconds: commands retry through it, not fail after a few
        // redirections.
        retryDelayOnFailover: 300,
        retryDelayOnClusterDown: 300,
        retryDelayOnTryAgain: 300,
        maxRedirections: 64,
        slotsRefreshTimeout: 2000,
        // With TLS the certificates name hosts, not the addresses CLUSTER SLOTS answers with.
        ...(tls
          ? { dnsLookup: (address: string, cb: (e: null, a: string) => void) => cb(null, address) }
          : {}),
      });
    case 'sentinel':
      return new Redis({
        ...common,
        sentinels: target.sentinels,
        name: target.masterName,
        ...(target.sentinelPassword ? { sentinelPassword: target.sentinelPassword } : {}),
        // tls: TLS to the master; sentinelTLS: to the sentinels (ioredis uses only that one for
        // them).
        ...(tls ? { tls, enableTLSForSentinelMode: true, sentinelTLS: tls } : {}),
        sentinelRetryStrategy: (times) => Math.min(times * 200, 2000),
        // No failoverDetector: its +switch-master handler can end the connection for good
        // mid-retry (seen in bench/ha.ts). Without it, a dead master's socket sends the client
        // back to the sentinels, and a demoted one answers READONLY (reconnectOnReadonly).
      });
  }
}

/**
 * Resolves when a SUBSCRIBE sent now cannot come before the ready check's INFO, which would
 * then fail in subscriber mode and drop the subscription (redis/ioredis#2037;
 * test/integration/redis-subscribe-handshake.test.ts).
 */
export function subscribeReady(redis: RedisClient): Promise<void> {
  if (redis.status !== 'connect') return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      for (const event of ['ready', 'close', 'end']) redis.off(event, done);
      resolve();
    };
    for (const event of ['ready', 'close', 'end']) redis.on(event, done);
  });
}

/** The connections to every master: one for a single server or Sentinel, each of a cluster. */
export function masters(redis: RedisClient): Redis[] {
  return isCluster(redis) ? redis.nodes('master') : [redis];
}

/**
 * Every key matching `pattern`, by SCAN on every master (never KEYS or a replica), in batches.
 */
export async function* scanKeys(redis: RedisClient, pattern: string, count = 1000): AsyncGenerator<string[]> {
  for (const node of masters(redis)) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', count);
      cursor = next;
      if (keys.length > 0) yield keys;
    } while (cursor !== '0');
  }
}

/**
 * Closes a connection: QUIT, but never waits more than `ms` for it (a reconnecting connection
 * would hold QUIT in its offline queue forever).
 */
export async function closeRedis(redis: RedisClient, ms = 2000): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
    timer.unref();
  });
  await Promise.race([
    redis.quit().then(
      () => {},
      () => {},
    ),
    timeout,
  ]);
  clearTimeout(timer);
  redis.disconnect();
}

/**
 * Redis's words when it refused our credentials (WRONGPASS, NOAUTH, a sentinel's refusal), else
 * undefined; a cluster keeps them in `lastNodeError`, Sentinel in its "Last error".
 */
export function credentialRefusal(err: unknown): string | undefined {
  if (!err || typeof err !== 'object') return undefined;
  const e = err as { message?: unknown; lastNodeError?: { message?: unknown } | null };
  for (const m of [e.message, e.lastNodeError?.message]) {
    if (typeof m === 'string' && /\b(?:WRONGPASS|NOAUTH)\b|invalid (?:username-)?password/i.test(m)) return m;
  }
  return undefined;
}

/** The variable(s) to fix when Redis refused the credentials. */
function credentialVariable(target: RedisTarget, redisWords: string): string {
  if (target.mode === 'sentinel' && /^All sentinels are unreachable/.test(redisWords)) {
    return 'REDIS_SENTINEL_PASSWORD';
  }
  if (target.mode === 'standalone') {
    let inUrl = false;
    try {
      const u = new URL(target.url);
      inUrl = Boolean(u.username || u.password);
    } catch {
      // loadConfig checked it parses
    }
    // A password in the URL wins over REDIS_PASSWORD (ioredis takes the URL's first).
    if (inUrl || !target.password) return 'REDIS_URL';
  }
  return target.username ? 'REDIS_USERNAME, REDIS_PASSWORD' : 'REDIS_PASSWORD';
}

/**
 * Waits until Redis answers for `timeoutMs`, then fails with a message an operator can act on.
 * Warns when maxmemory-policy is not noeviction, and when Redis persists nothing.
 */
export async function connectRedis(
  target: RedisTarget,
  options: { timeoutMs?: number; logger?: Logger; name?: string } = {},
): Promise<RedisClient> {
  const redis = createRedis(target, options.name);
  const timeoutMs = options.timeoutMs ?? 10_000;
  let lastError = '';
  let refused: ((err: Error) => void) | undefined;
  const onError = (err: Error) => {
    // Refused credentials, or an ACL that refuses PING (or CLUSTER SLOTS): no wait helps. Stop,
    // naming the variable or the rule.
    if (credentialRefusal(err) || permissionDenial(err)) {
      lastError = err.message;
      refused?.(err);
      return;
    }
    // A cluster says only "Failed to refresh slots cache."; the node's answer says why.
    const node = (err as { lastNodeError?: { message?: unknown } | null }).lastNodeError?.message;
    const text = typeof node === 'string' && node ? `${err.message} ${node}` : err.message;
    // Say once that we are waiting, so an operator sees why nothing happens yet (ioredis retries).
    if (!lastError) {
      options.logger?.warn(
        { redis: describeRedis(target), err: text },
        `Redis does not answer yet; retrying for up to ${Math.round(timeoutMs / 1000)} s (REDIS_CONNECT_TIMEOUT)`,
      );
    }
    lastError = text;
  };
  redis.on('error', onError);
  // ioredis retries a cluster whose ready check the ACL refuses without a word: after a moment
  // a seed node is asked once, so the missing rule is named.
  const diagnosis =
    target.mode === 'cluster'
      ? setTimeout(() => {
          void clusterRefusal(target).then(
            (err) => err && refused?.(err),
            () => {},
          );
        }, CLUSTER_DIAGNOSIS_MS)
      : undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new LearnerTransferError('LT_REDIS_UNREACHABLE', lastError || 'timed out')),
        timeoutMs,
      );
      refused = (err) => {
        clearTimeout(timer);
        reject(err);
      };
      redis.ping().then(
        () => {
          clearTimeout(timer);
          resolve();
        },
        (err: Error) => {
          clearTimeout(timer);
          // Redis answered, refusing writes (MISCONF refuses even PING): it is there; the write
          // gate holds transfers back.
          const refusal = isWriteRefusal(err);
          if (refusal && refusal.cause !== 'connection') resolve();
          else reject(err);
        },
      );
    });
  } catch (err) {
    clearTimeout(diagnosis);
    redis.disconnect();
    throw connectError(target, timeoutMs, err);
  }
  clearTimeout(diagnosis);
  redis.off('error', onError);
  keepLoggingErrors(redis, options.logger);
  await warnIfNotDurable(redis, options.logger);
  return redis;
}

/** "1.5 s", "10 s", "2 min": a wait as a person says it. */
function seconds(ms: number): string {
  return ms < 60_000 ? `${Number((ms / 1000).toFixed(1))} s` : humanizeMs(ms);
}

/** Why the connection failed: the rule or the variable to fix, or Redis is not there. */
function connectError(target: RedisTarget, timeoutMs: number, err: unknown): LearnerTransferError {
  const denial = permissionDenial(err);
  if (denial) return permissionError(redisUser(target), [denial], 'QUEUE_PREFIX', { cause: err });
  const words = credentialRefusal(err);
  if (words) {
    return new LearnerTransferError(
      'LT_CONFIG_INVALID',
      `${credentialVariable(target, words)}: Redis at ${describeRedis(target)} refused the credentials ` +
        `(${words.replace(/^All sentinels are unreachable\..*Last error: /, 'a sentinel: ')})`,
      { cause: err },
    );
  }
  return new LearnerTransferError(
    'LT_REDIS_UNREACHABLE',
    `Redis at ${describeRedis(target)} did not answer within ${seconds(timeoutMs)} (${(err as Error).message}). ` +
      `Start Redis, set ${redisVariable(target)}, or wait longer with REDIS_CONNECT_TIMEOUT.`,
    { cause: err },
  );
}

/**
 * Later errors (a restart mid-run) are reconnected by ioredis: logged once per interval, not
 * thrown.
 */
function keepLoggingErrors(redis: RedisClient, logger: Logger | undefined): void {
  if (logger) {
    const errors = new LogThrottle(logger);
    redis.on('error', (err) => errors.warn({ err: err.message }, 'redis connection error'));
    redis.once('end', () => errors.stop());
  } else {
    redis.on('error', () => {});
  }
}

/** Warns when Redis may evict queued jobs, and when it keeps nothing on disk. */
async function warnIfNotDurable(redis: RedisClient, logger: Logger | undefined): Promise<void> {
  const policy = await evictionPolicy(redis);
  if (policy !== undefined && policy !== 'noeviction') {
    logger?.warn(
      { maxmemoryPolicy: policy },
      `Redis maxmemory-policy is '${policy}': under memory pressure Redis may evict queued jobs and outcome ` +
        `records. Set maxmemory-policy noeviction.`,
    );
  }
  if ((await persistence(redis)) === 'none') {
    logger?.warn(
      { appendonly: 'no', save: '' },
      `${NO_PERSISTENCE_WARNING} (appendonly no, save ""): a Redis restart would lose the queues, the ` +
        `transfer budget log (the service's limits could then be overrun) and the audit of what each ` +
        `transfer deleted. Set appendonly yes (in redis.conf, or CONFIG SET appendonly yes and CONFIG REWRITE).`,
    );
  }
}

/** How long a cluster may take to become ready before a seed node is asked why. */
const CLUSTER_DIAGNOSIS_MS = 2000;

/** The ACL's refusal of CLUSTER INFO or CLUSTER SLOTS on a seed node, if that is its answer. */
async function clusterRefusal(target: Extract<RedisTarget, { mode: 'cluster' }>): Promise<Error | undefined> {
  const seed = target.nodes[0];
  if (!seed) return undefined;
  // createRedis read the CA file already: it can be read here too.
  const tls = tlsOptions(target);
  const probe = new Redis({
    host: seed.host,
    port: seed.port,
    ...(target.username ? { username: target.username } : {}),
    ...(target.password ? { password: target.password } : {}),
    ...(tls ? { tls } : {}),
    lazyConnect: true,
    enableReadyCheck: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: CLUSTER_DIAGNOSIS_MS,
  });
  probe.on('error', () => {});
  try {
    await probe.connect();
    for (const sub of ['INFO', 'SLOTS']) {
      const refusal = await probe.call('CLUSTER', sub).then(
        () => undefined,
        (err: unknown) => (permissionDenial(err) ? (err as Error) : undefined),
      );
      if (refusal) return refusal;
    }
    return undefined;
  } catch {
    return undefined; // not reachable either: the wait goes on and says so
  } finally {
    probe.disconnect();
  }
}

/** How the no-persistence warning begins (tests look for it). */
export const NO_PERSISTENCE_WARNING = 'Redis keeps nothing on disk';

/**
 * Whether Redis writes anything to disk: 'none' (no AOF, no RDB schedule), 'some', or undefined
 * when CONFIG is not allowed (managed Redis).
 */
export async function persistence(client: RedisClient): Promise<'none' | 'some' | undefined> {
  // On a cluster, one master that keeps nothing is enough to lose part of the state.
  const found = await Promise.all(masters(client).map((node) => nodePersistence(node)));
  if (found.includes('none')) return 'none';
  return found.includes('some') ? 'some' : undefined;
}

async function nodePersistence(redis: Redis): Promise<'none' | 'some' | undefined> {
  try {
    const [aof, save] = await Promise.all([
      redis.config('GET', 'appendonly') as Promise<string[]>,
      redis.config('GET', 'save') as Promise<string[]>,
    ]);
    if (aof[1] === undefined || save[1] === undefined) return undefined;
    return aof[1] === 'no' && save[1].trim() === '' ? 'none' : 'some';
  } catch {
    return undefined;
  }
}

/** The eviction policy, or undefined when CONFIG is not allowed (managed Redis). */
export async function evictionPolicy(client: RedisClient): Promise<string | undefined> {
  // On a cluster, the first master with another policy is the one to name.
  let seen: string | undefined;
  for (const node of masters(client)) {
    try {
      const reply = (await node.config('GET', 'maxmemory-policy')) as string[];
      if (reply[1] !== undefined && reply[1] !== 'noeviction') return reply[1];
      seen ??= reply[1];
    } catch {
      // CONFIG not allowed (managed Redis): nothing to say about this node.
    }
  }
  return seen;
}

/**
 * Deletes every key under a prefix (ours and BullMQ's) with SCAN and UNLINK, never KEYS or
 * FLUSHDB; returns the count.
 */
export async function deleteKeysUnder(redis: RedisClient, prefix: string): Promise<number> {
  let deleted = 0;
  for (const node of masters(redis)) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length === 0) continue;
      if (!isCluster(redis)) {
        deleted += await node.unlink(...keys);
        continue;
      }
      // Keys of one node may sit in different slots: one UNLINK each, pipelined.
      const pipe = node.pipeline();
      for (const k of keys) pipe.unlink(k);
      for (const [err, n] of (await pipe.exec()) ?? []) if (!err) deleted += Number(n);
    } while (cursor !== '0');
  }
  return deleted;
}
