// GET /healthz (the process answers) and GET /readyz (Redis answers PING): open without a token, since
// orchestrators probe them bare and they reveal nothing.
import type { FastifyInstance } from 'fastify';
import type { DashboardDeps } from '../deps.ts';

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
      return { status: 'ready', redis: pong === 'PONG' ? 'ok' : pong };
    } catch (err) {
      return reply.code(503).send({ status: 'unavailable', redis: (err as Error).message });
    } finally {
      clearTimeout(timer);
    }
  });
}
