// GET /healthz and GET /readyz, open without a token: orchestrators probe them bare, and they
// reveal nothing. The probe and its cache are ops/metrics/health.ts, shared with the worker.
import type { FastifyInstance } from 'fastify';
import type { DashboardDeps } from '../deps.ts';
import { cachedProbe, contextReadiness, READY_PROBE_INTERVAL_MS } from '../../ops/metrics/health.ts';

export { cachedProbe, READY_PROBE_INTERVAL_MS };

export function registerHealth(app: FastifyInstance, deps: DashboardDeps): void {
  const { ctx } = deps;
  const readiness = contextReadiness(ctx);
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_req, reply) => {
    const { statusCode, body } = await readiness();
    return reply.code(statusCode).send(body);
  });
}
