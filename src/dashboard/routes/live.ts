// GET /api/live: server-sent events, one `overview` event (the JSON of /api/overview) per interval.
import type { FastifyInstance } from 'fastify';
import { LiveFeed } from '../live.ts';
import { collectOverview } from '../queries/overview.ts';
import type { DashboardDeps } from '../deps.ts';

export function registerLive(app: FastifyInstance, deps: DashboardDeps): void {
  const feed = new LiveFeed(() => collectOverview(deps.ctx), deps.liveIntervalMs, deps.ctx.logger);
  app.addHook('onClose', async () => feed.close());
  app.get('/api/live', (_req, reply) => {
    // The stream outlives the handler: fastify hands the raw response over.
    reply.hijack();
    feed.add(reply.raw);
  });
}
