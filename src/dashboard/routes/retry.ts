// POST /api/retry: retry one, the selected, or every learner the filter matches, through the same
// retryFailed the CLI uses (re-queued into their own run, with fresh attempts). GET /api/csrf gives
// scripts the token every POST needs. Refused in read-only mode.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { retryFailed, type RetrySummary } from '../../ops/retry.ts';
import { badRequest, DashboardError, knownOrg, learnerIdParam, type DashboardDeps } from '../deps.ts';
import { failurePage } from '../../ops/failures.ts';
import { filterFields, toFailureFilter } from './failures-query.ts';

const MAX_SELECTED = 10_000;

const bodySchema = z.union([
  z.object({ learners: z.array(z.string()).min(1).max(MAX_SELECTED) }).strict(),
  z.object({ all: z.literal(true), ...filterFields }).strict(),
]);

function merge(into: RetrySummary, more: RetrySummary): void {
  into.requeued += more.requeued;
  for (const [org, n] of Object.entries(more.byOrg)) into.byOrg[org] = (into.byOrg[org] ?? 0) + n;
  for (const k of more.skipped) into.skipped.push(k);
}

export function registerRetry(app: FastifyInstance, deps: DashboardDeps): void {
  const { ctx } = deps;
  app.get('/api/csrf', async () => ({ token: deps.csrf.issue(), header: 'x-csrf-token' }));

  app.post('/api/retry', async (req) => {
    if (deps.readOnly)
      throw new DashboardError('LT_HTTP_READ_ONLY', 'this dashboard runs with --read-only: retries are off');
    const parsed = bodySchema.safeParse(req.body);
    if (!parsed.success) {
      throw badRequest(
        'body: expected {"learners": ["org:learnerId", ...]} or {"all": true, "code"?, "org"?, "run"?, "q"?}',
      );
    }
    const summary: RetrySummary = { requeued: 0, byOrg: {}, skipped: [] };
    const body = parsed.data;
    const byOrg = new Map<string, number[]>();
    let filterText: Record<string, unknown>;
    if ('learners' in body) {
      for (const key of body.learners) {
        const colon = key.lastIndexOf(':');
        if (colon < 1) throw badRequest(`learners: '${key.slice(0, 80)}' is not org:learnerId`);
        const org = knownOrg(deps, key.slice(0, colon), 'learners');
        const id = learnerIdParam(key.slice(colon + 1), 'learners');
        const list = byOrg.get(org);
        if (list) list.push(id);
        else byOrg.set(org, [id]);
      }
      for (const [org, learnerIds] of byOrg)
        merge(summary, await retryFailed(ctx, { orgs: [org], learnerIds }));
      filterText = { learners: body.learners.length };
    } else {
      const filter = await toFailureFilter(deps, body);
      filterText = { code: filter.code, orgs: filter.orgs, run: filter.runId, learner: filter.learnerId };
      if (filter.learnerId !== undefined) {
        // Only the organizations where this learner is a matching failure.
        const { items } = await failurePage(ctx.store, filter, 0, filter.orgs.length);
        for (const l of items)
          merge(summary, await retryFailed(ctx, { orgs: [l.org], learnerIds: [l.learnerId] }));
      } else {
        merge(
          summary,
          await retryFailed(ctx, { orgs: filter.orgs, status: filter.code, runId: filter.runId }),
        );
      }
    }
    ctx.logger.info({ ...filterText, requeued: summary.requeued, from: req.ip }, 'dashboard retry');
    return summary;
  });
}
