// GET / (page), GET /api/overview, GET /api/runs, GET /api/runs/:id.
import type { FastifyInstance } from 'fastify';
import { collectOverview, runOverview } from '../queries/overview.ts';
import { notFound, pageContext, sendPage, type DashboardDeps } from '../deps.ts';
import { overviewPage } from '../views/overview.ts';
import { RUN_ID_RE } from './failures-query.ts';

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
    const id = req.params.id;
    const meta = RUN_ID_RE.test(id) ? await ctx.runs.get(id) : undefined;
    if (!meta) throw notFound(`no run '${id.slice(0, 100)}'`);
    return runOverview(ctx, meta);
  });
}
