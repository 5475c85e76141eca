// GET /api/live: server-sent events, one `overview` event per interval for the view in the query,
// whole first, then only what changed (docs/dashboard-api.md). All streams share one collection
// (LiveFeed); beyond the cap of open streams, 503 with Retry-After.
import type { FastifyInstance } from 'fastify';
import { httpAnswer } from '../../core/errors.ts';
import type { Overview } from '../../ops/views/overview.ts';
import { LiveFeed } from '../live.ts';
import { OverviewLive } from '../live-overview.ts';
import type { DashboardDeps } from '../deps.ts';
import { parseOverviewView, viewKey } from './overview-query.ts';

/** The whole fleet is read again at least this often: ten ticks, never more than every 10 s. */
export function fleetEveryMs(intervalMs: number): number {
  return Math.max(10_000, 10 * intervalMs);
}

export function registerLive(
  app: FastifyInstance,
  deps: DashboardDeps,
): { feed: LiveFeed<Overview>; collector: OverviewLive } {
  const collector = new OverviewLive(deps.ctx, deps.liveFleetEveryMs ?? fleetEveryMs(deps.liveIntervalMs));
  const feed = new LiveFeed(collector, deps.liveIntervalMs, deps.ctx.logger, deps.liveMaxConnections);
  app.addHook('onClose', async () => feed.close());
  app.get('/api/live', (req, reply) => {
    const view = parseOverviewView(req.query);
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
    feed.add(reply.raw, viewKey(view));
  });
  return { feed, collector };
}
