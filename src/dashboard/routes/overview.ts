// GET / (page), GET /api/overview, GET /api/runs, GET /api/runs/:id.
import type { FastifyInstance } from 'fastify';
import { collectOverview, runOverview } from '../../ops/overview.ts';
import { notFound, pageContext, runIdParam, sendPage, type DashboardDeps } from '../deps.ts';
import { overviewPage } from '../views/overview.ts';

export function registerOverview(app: FastifyInstance, deps: DashboardDeps): void {
  const { ctx } = deps;
  app.get('/', async (_req, reply) =>
    sendPage(reply, overviewPage(pageContext(deps, '/'), await collectOverview(ctx))),
  );
  app.get('/api/overview', async () => collectOverview(ctx));
  app.get('/api/runs', async () => {
    const metas = await ctx.runs.list(50);
    return { runs: await Promise.all(metas.map((m) => runOverview(ctx, m))) };
  });
  app.get<{ Params: { id: string } }>('/api/runs/:id', async (req) => {
    const id = await runIdParam(deps, req.params.id, 'run id');
    const meta = await ctx.runs.get(id);
    if (!meta) throw notFound(`no run '${id.slice(0, 100)}'`);
    return runOverview(ctx, meta);
  });
}
