// GET /learners/:org/:id (page), GET /api/learners/:org/:id (record + audit entries), and
// GET /api/learners?ids=org:id,... (states of many learners, for following retried rows live).
import type { FastifyInstance } from 'fastify';
import { toLearnerOutcome, type Bucket, type LearnerOutcome } from '../../outcomes/record.ts';
import {
  badRequest,
  knownOrg,
  learnerIdParam,
  notFound,
  pageContext,
  sendPage,
  type DashboardDeps,
} from '../deps.ts';
import { FAILURE_BUCKETS } from '../../outcomes/record.ts';
import { learnerPage } from '../views/learner.ts';

const MAX_IDS = 500;

export function registerLearner(app: FastifyInstance, deps: DashboardDeps): void {
  const { ctx } = deps;
  const load = async (orgParam: string, idParam: string) => {
    const org = knownOrg(deps, orgParam);
    const id = learnerIdParam(idParam);
    const record = await ctx.store.get(org, id);
    if (!record) throw notFound(`no record of learner ${id} in ${org}`);
    const audit = await ctx.store.auditEntries(org, record.au ?? []);
    return { learner: toLearnerOutcome(org, id, record), audit };
  };

  app.get<{ Params: { org: string; id: string } }>('/api/learners/:org/:id', async (req) =>
    load(req.params.org, req.params.id),
  );
  app.get<{ Params: { org: string; id: string } }>('/learners/:org/:id', async (req, reply) => {
    const { learner, audit } = await load(req.params.org, req.params.id);
    const retryable = FAILURE_BUCKETS.includes(learner.state as Bucket);
    return sendPage(reply, learnerPage(pageContext(deps, '/learners'), learner, audit, retryable));
  });
  app.get<{ Querystring: { ids?: string } }>('/api/learners', async (req) => {
    const keys = (req.query.ids ?? '').split(',').filter(Boolean);
    if (keys.length === 0) throw badRequest('ids: expected org:learnerId pairs separated by commas');
    if (keys.length > MAX_IDS) throw badRequest(`ids: at most ${MAX_IDS} learners per request`);
    const byOrg = new Map<string, number[]>();
    for (const key of keys) {
      const colon = key.lastIndexOf(':');
      if (colon < 1) throw badRequest(`ids: '${key.slice(0, 80)}' is not org:learnerId`);
      const org = knownOrg(deps, key.slice(0, colon), 'ids');
      const id = learnerIdParam(key.slice(colon + 1), 'ids');
      const ids = byOrg.get(org);
      if (ids) ids.push(id);
      else byOrg.set(org, [id]);
    }
    const learners: LearnerOutcome[] = [];
    for (const [org, ids] of byOrg) {
      const records = await ctx.store.getMany(org, ids);
      ids.forEach((id, i) => {
        const r = records[i];
        if (r) learners.push(toLearnerOutcome(org, id, r));
      });
    }
    return { learners };
  });
}
