// GET /api/live: server-sent events, one `overview` event (the JSON of /api/overview) per interval.
// All streams share one collection per interval (see LiveFeed); beyond the cap of open streams the
// answer is 503 with Retry-After (the page falls back to reloading).
import type { FastifyInstance } from 'fastify';
import { httpAnswer } from '../../core/errors.ts';
import { LiveFeed } from '../live.ts';
import { collectOverview } from '../../ops/overview.ts';
import type { DashboardDeps } from '../deps.ts';

export function registerLive(app: FastifyInstance, deps: DashboardDeps): LiveFeed<unknown> {
  const feed = new LiveFeed(
    () => collectOverview(deps.ctx),
    deps.liveIntervalMs,
    deps.ctx.logger,
    deps.liveMaxConnections,
  );
  app.addHook('onClose', async () => feed.close());
  app.get('/api/live', (_req, reply) => {
    if (feed.full) {
      const refused = httpAnswer('LT_HTTP_TOO_MANY_STREAMS');
      return reply
        .code(refused.status)
        .header('retry-after', String(Math.max(1, Math.ceil(deps.liveIntervalMs / 1000))))
        .send({
          error: refused.error,
          message: `at most ${feed.maxClients} live streams at once: close another tab, or poll /api/overview`,
        });
    }
    // The stream outlives the handler: fastify hands the raw response over.
    reply.hijack();
    feed.add(reply.raw);
  });
  return feed;
}
