// WAIT 1 after the writes that must survive a failover (permit and lease, the finished
// attempt), on a master that has a replica (docs/high-availability.md). Group commit: Redis
// runs nothing else from a client while its WAIT blocks, so a write answered during a WAIT is
// covered by it, and a caller joins that WAIT instead of sending its own.
import calculateSlot from 'cluster-key-slot';
import type { Redis } from 'ioredis';
import type { Logger } from '../core/log.ts';
import { LogThrottle } from '../core/log-throttle.ts';
import { isCluster, type RedisClient } from './client.ts';

/** How long a master's replica count is trusted before INFO replication is read again. */
const REPLICAS_TTL_MS = 5000;

export interface DurabilityStats {
  /** WAITs sent (writes that had a replica to wait for). */
  waits: number;
  /** Callers that joined a WAIT already under way on the same connection. */
  joined: number;
  /** WAITs that timed out with no replica acknowledging: those writes live on the master alone. */
  unacknowledged: number;
  /** Writes on a master without a replica: nothing to wait for. */
  noReplica: number;
}

export class Durability {
  readonly #redis: RedisClient;
  readonly #timeoutMs: number;
  readonly #replicas = new Map<string, { count: number; at: number }>();
  readonly #warn: LogThrottle | undefined;
  readonly stats: DurabilityStats = { waits: 0, joined: 0, unacknowledged: 0, noReplica: 0 };
  /** The WAIT under way per master (address), shared by the callers that join it. */
  readonly #inflight = new Map<string, Promise<number>>();

  /** `timeoutMs` 0 turns WAIT off (REDIS_WAIT_TIMEOUT=0). */
  constructor(redis: RedisClient, timeoutMs: number, logger?: Logger) {
    this.#redis = redis;
    this.#timeoutMs = timeoutMs;
    this.#warn = logger ? new LogThrottle(logger) : undefined;
  }

  /**
   * Waits until a replica of the master serving `key` has this process's writes, for at most
   * REDIS_WAIT_TIMEOUT. False when it timed out (logged, counted): the caller goes on.
   */
  async replicated(key: string): Promise<boolean> {
    if (this.#timeoutMs <= 0) return true;
    const node = this.#nodeFor(key);
    if (!node) return true;
    const address = `${node.options.host ?? ''}:${node.options.port ?? ''}`;
    if ((await this.#replicaCount(node, address)) === 0) {
      this.stats.noReplica++;
      return true;
    }
    const underWay = this.#inflight.get(address);
    if (underWay) {
      this.stats.joined++;
      return (await underWay) >= 1;
    }
    this.stats.waits++;
    // Dropped in the first reaction to WAIT's reply: ioredis resolves replies in order, so no
    // caller sees a write answered after this WAIT and joins it.
    const done = (n: number): number => {
      if (this.#inflight.get(address) === sent) this.#inflight.delete(address);
      return n;
    };
    const sent: Promise<number> = node.wait(1, this.#timeoutMs).then(done, () => done(0));
    // (A rejection: the master is gone; the caller's next write finds the new one.)
    this.#inflight.set(address, sent);
    const acked = await sent;
    if (acked >= 1) return true;
    this.stats.unacknowledged++;
    this.#replicas.delete(address);
    this.#warn?.warn(
      { redis: address, timeoutMs: this.#timeoutMs },
      'no Redis replica acknowledged a write within REDIS_WAIT_TIMEOUT: until one does, a failover could lose it',
    );
    return false;
  }

  stop(): void {
    this.#warn?.stop();
  }

  /** The connection to the master that serves `key`: the client itself unless it is a cluster. */
  #nodeFor(key: string): Redis | undefined {
    const redis = this.#redis;
    if (!isCluster(redis)) return redis;
    const owner = redis.slots[calculateSlot(key)]?.[0];
    if (!owner) return undefined;
    return redis.nodes('master').find((n) => `${n.options.host ?? ''}:${n.options.port ?? ''}` === owner);
  }

  async #replicaCount(node: Redis, address: string): Promise<number> {
    const now = Date.now();
    const known = this.#replicas.get(address);
    if (known && now - known.at < REPLICAS_TTL_MS) return known.count;
    let count = 0;
    try {
      const info = await node.info('replication');
      count = Number(/^connected_slaves:(\d+)/m.exec(info)?.[1] ?? 0);
    } catch {
      count = known?.count ?? 0;
    }
    this.#replicas.set(address, { count, at: now });
    return count;
  }
}
