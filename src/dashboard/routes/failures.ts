// GET /failures (page) and GET /api/failures: the paginated failures table and its filters.
import type { FastifyInstance } from 'fastify';
import { failurePage } from '../../ops/views/failures.ts';
import { FAILURE_BUCKETS } from '../../outcomes/record.ts';
import { pageContext, sendPage, type DashboardDeps } from '../deps.ts';
import { failuresPage } from '../views/failures.ts';
import { parseFailureQuery } from './failures-query.ts';

export function registerFailures(app: FastifyInstance, deps: DashboardDeps): void {
  const { ctx } = deps;
  app.get('/api/failures', async (req) => {
    const q = await parseFailureQuery(deps, req.query);
    const page = await failurePage(ctx.store, q.filter, q.offset, q.limit);
    return { filter: { ...q.input, orgs: q.filter.orgs }, ...page };
  });
  app.get('/failures', async (req, reply) => {
    const q = await parseFailureQuery(deps, req.query);
    const page = await failurePage(ctx.store, q.filter, q.offset, q.limit);
    // Counts per code under the other filters, for the summary line (cheap: ZCARD or run counters).
    const byCode: Record<string, number> = {};
    if (q.filter.learnerId === undefined) {
      for (const code of q.filter.code ? [q.filter.code] : FAILURE_BUCKETS) {
        const n = (await failurePage(ctx.store, { ...q.filter, code }, 0, 0)).total;
        if (n > 0) byCode[code] = n;
      }
    }
    const runs = (await ctx.runs.list(50)).map((r) => r.id);
    return sendPage(
      reply,
      failuresPage(pageContext(deps, '/failures', req), {
        page,
        filter: q.input,
        codes: FAILURE_BUCKETS,
        orgs: ctx.config.orgs,
        runs: q.input.run && !runs.includes(q.input.run) ? [...runs, q.input.run] : runs,
        byCode,
      }),
    );
  });
}
