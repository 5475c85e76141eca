// GET /healthz (the process answers) and GET /readyz (Redis answers PING and takes writes): open without
// a token, since orchestrators probe them bare and they reveal nothing. Being open, /readyz answers from
// a cached probe: at most one probe (PING, a probe write, INFO) per READY_PROBE_INTERVAL_MS, however
// many requests arrive; requests during a probe share it.
import type { FastifyInstance } from 'fastify';
import type { DashboardDeps } from '../deps.ts';
import { checkRedisWrites } from '../../redis/writes.ts';
import { LearnerTransferError } from '../../core/errors.ts';

const PING_TIMEOUT_MS = 2000;
/** How long a probe's answer is served after it arrived. */
export const READY_PROBE_INTERVAL_MS = 1000;

interface Readiness {
  statusCode: 200 | 503;
  body: { status: 'ready' | 'unavailable'; redis: string };
}

async function probeReadiness(deps: DashboardDeps): Promise<Readiness> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const pong = await Promise.race([
      deps.ctx.redis.ping(),
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
    const writes = await checkRedisWrites(deps.ctx.redis, {
      probeKey: deps.ctx.keys.writeProbe(),
      highWater: deps.ctx.config.redisHighWater,
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
    deps.ctx.logger.warn(
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

export function registerHealth(app: FastifyInstance, deps: DashboardDeps): void {
  const readiness = cachedProbe(() => probeReadiness(deps), READY_PROBE_INTERVAL_MS);
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_req, reply) => {
    const { statusCode, body } = await readiness();
    return reply.code(statusCode).send(body);
  });
}
