// Readiness (/readyz, dashboard and `work --metrics-port`): Redis answers PING and takes writes. Open to
// anyone, so at most one probe per READY_PROBE_INTERVAL_MS however many requests arrive.
import type { RedisClient } from '../../redis/client.ts';
import { checkRedisWrites, type WriteState } from '../../redis/writes.ts';
import type { Logger } from '../../core/log.ts';
import { LearnerTransferError } from '../../core/errors.ts';

const PING_TIMEOUT_MS = 2000;
/** How long a probe's answer is served after it arrived. */
export const READY_PROBE_INTERVAL_MS = 1000;

export interface Readiness {
  statusCode: 200 | 503;
  body: { status: 'ready' | 'unavailable'; redis: string };
}

/** What a readiness probe reads: the connection, the probe key, the high-water mark and the log. */
export interface ReadinessSource {
  redis: RedisClient;
  probeKey: string;
  highWater: number;
  logger: Logger;
}

/** One probe: PING within 2 s, then whether Redis takes writes. The answer never holds Redis's text. */
/**
 * The readiness of a process's Redis, probed at most once per READY_PROBE_INTERVAL_MS whatever the
 * request rate: the dashboard's /readyz and the worker's metrics port both answer from it.
 */
export function contextReadiness(ctx: {
  redis: RedisClient;
  keys: { writeProbe(): string };
  config: { redisHighWater: number };
  logger: Logger;
}): () => Promise<Readiness> {
  return cachedProbe(
    () =>
      probeReadiness({
        redis: ctx.redis,
        probeKey: ctx.keys.writeProbe(),
        highWater: ctx.config.redisHighWater,
        logger: ctx.logger,
      }),
    READY_PROBE_INTERVAL_MS,
  );
}

export async function probeReadiness(src: ReadinessSource): Promise<Readiness> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const pong = await Promise.race([
      src.redis.ping(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () =>
            reject(
              new LearnerTransferError('LT_REDIS_UNREACHABLE', `no answer within ${PING_TIMEOUT_MS} ms`),
            ),
          PING_TIMEOUT_MS,
        );
      }),
    ]);
    // A Redis that answers but refuses writes cannot record a retry: not ready. The reason is a fixed
    // text (the cause's code), never Redis's reply. Above the high-water mark writes still work: ready.
    const writes = await checkRedisWrites(src.redis, {
      probeKey: src.probeKey,
      highWater: src.highWater,
      timeoutMs: PING_TIMEOUT_MS,
    }).catch(() => null);
    if (writes && !writes.writable && writes.cause !== 'high-water') {
      return { statusCode: 503, body: { status: 'unavailable', redis: `refusing writes (${writes.cause})` } };
    }
    if (writes?.cause === 'high-water')
      return { statusCode: 200, body: { status: 'ready', redis: 'above the memory high-water mark' } };
    return { statusCode: 200, body: { status: 'ready', redis: pong === 'PONG' ? 'ok' : pong } };
  } catch (err) {
    // The probe is open without a token: Redis's own error text (hosts, ports, what it refused) goes to
    // the log for the operator (once per probe, not per request), and the answer says only that Redis
    // is not reachable.
    src.logger.warn(
      { err: (err as Error)?.message ?? String(err) },
      'readyz: Redis did not answer PING; answering 503',
    );
    return { statusCode: 503, body: { status: 'unavailable', redis: 'not reachable' } };
  } finally {
    clearTimeout(timer);
  }
}

/** The last probe's answer while it is younger than intervalMs after it arrived, else a new probe. */
export function cachedProbe<T>(
  probe: () => Promise<T>,
  intervalMs: number,
  now: () => number = Date.now,
): () => Promise<T> {
  let inFlight: Promise<T> | undefined;
  let last: { at: number; value: T } | undefined;
  return () => {
    if (last && now() - last.at < intervalMs) return Promise.resolve(last.value);
    inFlight ??= probe().then(
      (value) => {
        last = { at: now(), value };
        inFlight = undefined;
        return value;
      },
      (err: unknown) => {
        inFlight = undefined;
        throw err;
      },
    );
    return inFlight;
  };
}

/**
 * A worker's readiness: not ready while its write gate is shut (it sends nothing then, whatever the
 * cause, the high-water mark included: the headroom is kept for outcomes of calls already made), else
 * the cached probe's answer. The gate is read at each request (it is in memory, and costs nothing).
 */
export function workerReadiness(
  gate: () => WriteState | undefined,
  probe: () => Promise<Readiness>,
): () => Promise<Readiness> {
  return async () => {
    const state = gate();
    if (state && !state.writable) {
      return { statusCode: 503, body: { status: 'unavailable', redis: `write gate shut (${state.cause})` } };
    }
    return probe();
  };
}
