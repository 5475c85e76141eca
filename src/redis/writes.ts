// Whether Redis takes writes: a worker that cannot record an outcome must not call the API.
// Each refusal (OOM, READONLY, MISCONF, NOREPLICAS) is named with its fix.
import type { Cluster, Redis } from 'ioredis';
import calculateSlot from 'cluster-key-slot';
import { isCluster, type RedisClient } from './client.ts';
import type { Logger } from '../core/log.ts';
import { LearnerTransferError } from '../core/errors.ts';

import { isWriteRefusal, type RefusalCause } from './refusals.ts';
export type WriteCause = 'ok' | 'high-water' | RefusalCause;

export interface WriteState {
  writable: boolean;
  cause: WriteCause;
  /** used_memory / maxmemory; null when maxmemory is 0 (no limit) or INFO could not be read. */
  memoryRatio: number | null;
  /** The cause and its fix, for a person. Never Redis's own error text (it may name hosts). */
  message: string;
}

export const DEFAULT_HIGH_WATER = 0.9;

function percent(ratio: number): string {
  return `${Math.floor(ratio * 100)}%`;
}

const TRIM_HINT =
  'raise maxmemory, or export and trim the audit (learner-transfer audit --out FILE --trim, or AUDIT_ARCHIVE_DIR)';

/** The message of a state: the cause and what to do about it. */
export function writeMessage(cause: WriteCause, memoryRatio: number | null, highWater: number): string {
  const at = memoryRatio === null ? '' : ` (${percent(memoryRatio)} of maxmemory)`;
  switch (cause) {
    case 'ok':
      return memoryRatio === null
        ? 'Redis takes writes (no maxmemory set)'
        : `Redis takes writes (${percent(memoryRatio)} of maxmemory)`;
    case 'high-water':
      return (
        `Redis is at ${percent(memoryRatio ?? 1)} of maxmemory, above the high-water mark of ${percent(highWater)} ` +
        `(REDIS_HIGH_WATER): ${TRIM_HINT}`
      );
    case 'OOM':
      return `Redis refuses writes: out of memory${at} with maxmemory-policy noeviction: ${TRIM_HINT}`;
    case 'READONLY':
      return 'Redis is a read-only replica (after a failover, or REPLICAOF): point REDIS_URL at the master';
    case 'MISCONF':
      return 'Redis cannot save its RDB snapshot and refuses writes: fix the disk or the dir, see the Redis log';
    case 'NOREPLICAS':
      return 'Redis has fewer replicas than min-replicas-to-write and refuses writes: bring a replica back, or lower min-replicas-to-write';
    case 'LOADING':
      return 'Redis is loading its dataset (after a restart): writes resume when it is done';
    case 'connection':
      return 'Redis does not answer: check that it runs and that REDIS_URL (or REDIS_CLUSTER_NODES, REDIS_SENTINELS) points at it (the workers reconnect by themselves)';
  }
}

export interface CheckOptions {
  probeKey: string;
  /** Ratio of maxmemory above which writes are held back (default 0.9). */
  highWater?: number;
  /** A check that gets no answer within this long says 'connection' (default 2000 ms). */
  timeoutMs?: number;
}

class CheckTimeout extends LearnerTransferError {
  constructor(ms: number) {
    super('LT_REDIS_UNREACHABLE', `the write check got no answer within ${ms} ms`);
  }
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new CheckTimeout(ms)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/** used_memory / maxmemory from an INFO memory reply; null when maxmemory is 0 (no limit). */
export function memoryRatioOf(info: string): number | null {
  const field = (name: string) => {
    const m = new RegExp(`^${name}:(\\d+)\\s*$`, 'm').exec(info);
    return m ? Number(m[1]) : undefined;
  };
  const used = field('used_memory');
  const max = field('maxmemory');
  if (used === undefined || !max) return null;
  return used / max;
}

type ProbeReplies = [PromiseSettledResult<string>, PromiseSettledResult<unknown>];

/** The probe in flight per connection: while Redis does not answer, later checks wait on it. */
const unanswered = new WeakMap<RedisClient, Promise<ProbeReplies>>();

function probe(redis: RedisClient, probeKey: string): Promise<ProbeReplies> {
  let replies = unanswered.get(redis);
  if (!replies) {
    // Both in flight at once; INFO failing (LOADING) does not skip the probe.
    const sent = Promise.allSettled([
      redis.info('memory'),
      redis.set(probeKey, String(Date.now()), 'PX', 60_000),
    ]) as Promise<ProbeReplies>;
    replies = sent;
    unanswered.set(redis, sent);
    void sent.then(() => {
      if (unanswered.get(redis) === sent) unanswered.delete(redis);
    });
  }
  return replies;
}

/**
 * Reads INFO memory and makes one tiny probe write (SET, 60 s expiry: refused under OOM,
 * READONLY, MISCONF and NOREPLICAS alike). Above the high-water mark it is not writable even
 * when the probe went through: the headroom is for outcomes of calls already made.
 */
export async function checkRedisWrites(redis: RedisClient, options: CheckOptions): Promise<WriteState> {
  if (!isCluster(redis)) return checkNode(redis, options.probeKey, options);
  // A cluster takes our writes only when every master does: each master is probed with a key of
  // one of its slots, and the worst state wins.
  const targets = redis
    .nodes('master')
    .map((node) => ({ node, key: probeKeyFor(redis, node, options.probeKey) }));
  const known = targets.filter((t): t is { node: Redis; key: string } => t.key !== undefined);
  if (known.length === 0) return checkNode(redis, options.probeKey, options);
  const states = await Promise.all(known.map((t) => checkNode(t.node, t.key, options)));
  const worst = states.find((s) => !s.writable) ?? states[0];
  const ratios = states.map((s) => s.memoryRatio).filter((r): r is number => r !== null);
  const memoryRatio = ratios.length > 0 ? Math.max(...ratios) : null;
  return { ...(worst as WriteState), memoryRatio };
}

/**
 * A probe key with a {hash tag} whose slot `node` serves; undefined while its slots are
 * unknown.
 */
function probeKeyFor(cluster: Cluster, node: Redis, probeKey: string): string | undefined {
  const address = `${node.options.host ?? ''}:${node.options.port ?? ''}`;
  for (let i = 0; i < 4096; i++) {
    const key = `${probeKey}:{p${i}}`;
    if (cluster.slots[calculateSlot(key)]?.[0] === address) return key;
  }
  return undefined;
}

async function checkNode(redis: RedisClient, probeKey: string, options: CheckOptions): Promise<WriteState> {
  const highWater = options.highWater ?? DEFAULT_HIGH_WATER;
  const state = (cause: WriteCause, memoryRatio: number | null): WriteState => ({
    writable: cause === 'ok',
    cause,
    memoryRatio,
    message: writeMessage(cause, memoryRatio, highWater),
  });
  let replies: ProbeReplies;
  try {
    replies = await withTimeout(probe(redis, probeKey), options.timeoutMs ?? 2000);
  } catch (err) {
    if (err instanceof CheckTimeout) return state('connection', null);
    throw err;
  }
  const [info, set] = replies;
  const memoryRatio = info.status === 'fulfilled' ? memoryRatioOf(info.value) : null;
  if (set.status === 'rejected') {
    const refusal = isWriteRefusal(set.reason);
    if (!refusal) throw set.reason;
    return state(refusal.cause, memoryRatio);
  }
  if (memoryRatio !== null && memoryRatio >= highWater) return state('high-water', memoryRatio);
  return state('ok', memoryRatio);
}

export interface WriteGateOptions extends CheckOptions {
  /** Interval of the checks while Redis takes writes (default 2000 ms). */
  pollMs?: number;
  /** Interval of the checks while it does not (default 400 ms). */
  closedPollMs?: number;
  /** Interval of the checks while no worker is attached (setIdle; default 30000 ms). */
  idlePollMs?: number;
  /**
   * Hysteresis: closed at the high-water mark, the gate reopens only below the mark minus this
   * (0.02).
   */
  hysteresis?: number;
  logger?: Logger;
}

export type WriteGateListener = (state: WriteState, previous: WriteState) => void;

/** Named and coded as Node's own abort (AbortError, ABORT_ERR). */
class AbortedWait extends LearnerTransferError {
  constructor() {
    super('ABORT_ERR', 'waiting for Redis to take writes was aborted');
    this.name = 'AbortError';
  }
}

/**
 * For `work` processes: knows, within a poll, whether Redis takes writes, so a job waits
 * instead of spending an attempt on a refused write. Logs once per transition.
 */
export class WriteGate {
  readonly #redis: RedisClient;
  readonly #options: CheckOptions;
  readonly #pollMs: number;
  readonly #closedPollMs: number;
  readonly #idlePollMs: number;
  /** No worker attached: nothing is sent that a refusal could lose, so the check is rare. */
  #idle = false;
  readonly #hysteresis: number;
  readonly #logger: Logger | undefined;
  readonly #listeners = new Set<WriteGateListener>();
  readonly #waiters = new Set<() => void>();
  #state: WriteState;
  #closedAt: number | undefined;
  #timer: NodeJS.Timeout | undefined;
  #running = false;
  /** Bumped by noteError: a check that started before a refused write cannot reopen the gate. */
  #epoch = 0;
  #checkErrorLogged = false;

  constructor(redis: RedisClient, options: WriteGateOptions) {
    this.#redis = redis;
    this.#options = {
      probeKey: options.probeKey,
      highWater: options.highWater ?? DEFAULT_HIGH_WATER,
      timeoutMs: options.timeoutMs ?? 2000,
    };
    this.#pollMs = options.pollMs ?? 2000;
    this.#closedPollMs = options.closedPollMs ?? 400;
    this.#idlePollMs = options.idlePollMs ?? 30_000;
    this.#hysteresis = options.hysteresis ?? 0.02;
    this.#logger = options.logger;
    this.#state = { writable: true, cause: 'ok', memoryRatio: null, message: 'Redis not checked yet' };
  }

  get state(): WriteState {
    return this.#state;
  }

  get isOpen(): boolean {
    return this.#state.writable;
  }

  /** Starts polling; resolves with the first check's state. */
  start(): Promise<WriteState> {
    this.#running = true;
    return this.#poll();
  }

  stop(): void {
    this.#running = false;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** Idle (no worker attached): checked every idlePollMs; leaving idle checks at once. */
  setIdle(idle: boolean): void {
    if (idle === this.#idle) return;
    this.#idle = idle;
    if (!idle && this.#running && this.#state.writable) this.#schedule(0);
  }

  /** Listens to every change of the state; returns the unsubscribe. */
  onChange(listener: WriteGateListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Tells the gate about an error a command met; true (and the gate closed) for a refused write
   * or a lost connection.
   */
  noteError(err: unknown): boolean {
    const refusal = isWriteRefusal(err);
    if (!refusal) return false;
    this.#epoch++;
    this.#set({
      writable: false,
      cause: refusal.cause,
      memoryRatio: this.#state.memoryRatio,
      message: writeMessage(refusal.cause, this.#state.memoryRatio, this.#highWater),
    });
    if (this.#running) this.#schedule(this.#closedPollMs);
    return true;
  }

  /** Resolves at once when open, else when a later check finds Redis writable; rejects on abort. */
  waitOpen(signal?: AbortSignal): Promise<void> {
    if (this.#state.writable) return Promise.resolve();
    if (signal?.aborted) return Promise.reject(signal.reason ?? new AbortedWait());
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        this.#waiters.delete(done);
        reject(signal?.reason ?? new AbortedWait());
      };
      const done = () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      this.#waiters.add(done);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  get #highWater(): number {
    return this.#options.highWater ?? DEFAULT_HIGH_WATER;
  }

  #schedule(ms: number): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => void this.#poll(), ms);
    this.#timer.unref();
  }

  async #poll(): Promise<WriteState> {
    const epoch = this.#epoch;
    try {
      this.#apply(await checkRedisWrites(this.#redis, this.#options), epoch);
      this.#checkErrorLogged = false;
    } catch (err) {
      // Not a refusal (an ACL without SET or INFO, say): keep the last verdict, say so once.
      if (!this.#checkErrorLogged) {
        this.#checkErrorLogged = true;
        this.#logger?.warn(
          { err: (err as Error).message },
          'cannot check whether Redis takes writes; keeping the last verdict',
        );
      }
    }
    if (this.#running) {
      this.#schedule(
        !this.#state.writable ? this.#closedPollMs : this.#idle ? this.#idlePollMs : this.#pollMs,
      );
    }
    return this.#state;
  }

  #closedState(cause: WriteCause, memoryRatio: number | null): WriteState {
    return {
      writable: false,
      cause,
      memoryRatio,
      message: writeMessage(cause, memoryRatio, this.#highWater),
    };
  }

  #apply(next: WriteState, epoch: number): void {
    const prev = this.#state;
    if (next.writable) {
      // A refused write was seen after this check began: the check cannot vouch for Redis now.
      if (!prev.writable && epoch !== this.#epoch) return;
      // Hysteresis on the memory mark only: a refusal's fix is its own proof.
      if (
        prev.cause === 'high-water' &&
        next.memoryRatio !== null &&
        next.memoryRatio >= this.#highWater - this.#hysteresis
      ) {
        this.#set(this.#closedState('high-water', next.memoryRatio));
        return;
      }
    }
    this.#set(next);
  }

  #set(next: WriteState): void {
    const prev = this.#state;
    if (
      prev.writable === next.writable &&
      prev.cause === next.cause &&
      prev.memoryRatio === next.memoryRatio &&
      prev.message === next.message
    ) {
      return;
    }
    this.#state = next;
    if (prev.writable && !next.writable) {
      this.#closedAt = Date.now();
      this.#logger?.error(
        { cause: next.cause, memoryRatio: next.memoryRatio },
        `Redis does not take writes: ${next.message}. Workers wait until it does.`,
      );
    } else if (!prev.writable && next.writable) {
      const closedMs = this.#closedAt === undefined ? 0 : Date.now() - this.#closedAt;
      this.#closedAt = undefined;
      this.#logger?.info(
        { closedMs, after: prev.cause },
        `Redis takes writes again after ${(closedMs / 1000).toFixed(1)} s (${prev.cause})`,
      );
      const waiters = [...this.#waiters];
      this.#waiters.clear();
      for (const w of waiters) w();
    } else if (!prev.writable && prev.cause !== next.cause) {
      this.#logger?.error(
        { cause: next.cause, memoryRatio: next.memoryRatio, was: prev.cause },
        `Redis still does not take writes: ${next.message}`,
      );
    }
    for (const l of this.#listeners) {
      try {
        l(next, prev);
      } catch (err) {
        this.#logger?.warn({ err: (err as Error).message }, 'write gate listener failed');
      }
    }
  }
}
