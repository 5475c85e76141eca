// GET /healthz (the process answers) and GET /readyz (Redis answers PING and takes writes): open without
// a token, since orchestrators probe them bare and they reveal nothing.
import type { FastifyInstance } from 'fastify';
import type { DashboardDeps } from '../deps.ts';
import { checkRedisWrites, writeProbeKey } from '../../redis-writes.ts';

const PING_TIMEOUT_MS = 2000;

export function registerHealth(app: FastifyInstance, deps: DashboardDeps): void {
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_req, reply) => {
    let timer: NodeJS.Timeout | undefined;
    try {
      const pong = await Promise.race([
        deps.ctx.redis.ping(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`no answer within ${PING_TIMEOUT_MS} ms`)),
            PING_TIMEOUT_MS,
          );
        }),
      ]);
      // A Redis that answers but refuses writes cannot record a retry: not ready. The reason is a fixed
      // text (the cause's code), never Redis's reply. Above the high-water mark writes still work: ready.
      const writes = await checkRedisWrites(deps.ctx.redis, {
        probeKey: writeProbeKey(deps.ctx.keys.prefix),
        highWater: deps.ctx.config.redisHighWater,
        timeoutMs: PING_TIMEOUT_MS,
      }).catch(() => null);
      if (writes && !writes.writable && writes.cause !== 'high-water') {
        return reply.code(503).send({ status: 'unavailable', redis: `refusing writes (${writes.cause})` });
      }
      if (writes?.cause === 'high-water')
        return { status: 'ready', redis: 'above the memory high-water mark' };
      return { status: 'ready', redis: pong === 'PONG' ? 'ok' : pong };
    } catch (err) {
      // The probe is open without a token: Redis's own error text (hosts, ports, what it refused) goes to
      // the log for the operator, and the answer says only that Redis is not reachable.
      deps.ctx.logger.warn(
        { err: (err as Error)?.message ?? String(err) },
        'readyz: Redis did not answer PING; answering 503',
      );
      return reply.code(503).send({ status: 'unavailable', redis: 'not reachable' });
    } finally {
      clearTimeout(timer);
    }
  });
}
