// GET / (page), GET /api/overview, GET /api/runs, GET /api/runs/:id. The page and /api/overview
// take the view's query (overview-query.ts).
import type { FastifyInstance } from 'fastify';
import { collectOverview, runOverview } from '../../ops/views/overview.ts';
import { runOverviews } from '../../ops/views/run-overview.ts';
import { notFound, pageContext, runIdParam, sendPage, type DashboardDeps } from '../deps.ts';
import { overviewPage } from '../views/overview.ts';
import { parseOverviewView } from './overview-query.ts';

export function registerOverview(app: FastifyInstance, deps: DashboardDeps): void {
  const { ctx } = deps;
  app.get('/', async (req, reply) => {
    const view = parseOverviewView(req.query);
    return sendPage(reply, overviewPage(pageContext(deps, '/', req), await collectOverview(ctx, view)));
  });
  app.get('/api/overview', async (req) => collectOverview(ctx, parseOverviewView(req.query)));
  app.get('/api/runs', async () => ({ runs: await runOverviews(ctx, await ctx.runs.list(50)) }));
  app.get<{ Params: { id: string } }>('/api/runs/:id', async (req) => {
    const id = await runIdParam(deps, req.params.id, 'run id');
    const meta = await ctx.runs.get(id);
    if (!meta) throw notFound(`no run '${id.slice(0, 100)}'`);
    return runOverview(ctx, meta);
  });
}
