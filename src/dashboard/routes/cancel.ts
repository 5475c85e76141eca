// POST /api/cancel: `learner-transfer cancel` from the dashboard, through the same
// cancelLearners, with the dashboard's author in the change log; "dryRun" answers the count the
// dialog shows. Refused in read-only mode and to the viewer.
import type { FastifyInstance } from 'fastify';
import * as z from 'zod';
import { cancelLearners, type CancelSummary, type LearnerRef } from '../../ops/actions/cancel.ts';
import { actorOf } from '../auth.ts';
import { badRequest, DashboardError, knownOrg, learnersByOrg, type DashboardDeps } from '../deps.ts';

const MAX_NAMED = 10_000;

const bodySchema = z.union([
  z
    .object({ run: z.string().min(1).max(200), org: z.string().optional(), dryRun: z.boolean().optional() })
    .strict(),
  z.object({ learners: z.array(z.string()).min(1).max(MAX_NAMED), dryRun: z.boolean().optional() }).strict(),
]);

/**
 * The answer: the summary, and what the confirmation dialog reads (a retry's dry run's shape): a
 * cancel asks only for the count, never for an explicit "anyway".
 */
export type CancelAnswer = CancelSummary & {
  matched: number;
  byCode: Record<string, number>;
  confirm: string[];
};

function answer(s: CancelSummary): CancelAnswer {
  const byCode: Record<string, number> = {};
  if (s.cancelled > 0) byCode['not called yet'] = s.cancelled;
  return { ...s, matched: s.cancelled, byCode, confirm: [] };
}

export function registerCancel(app: FastifyInstance, deps: DashboardDeps): void {
  app.post('/api/cancel', async (req) => {
    if (deps.readOnly)
      throw new DashboardError(
        'LT_HTTP_READ_ONLY',
        'this dashboard runs with --read-only: cancelling is off',
      );
    const parsed = bodySchema.safeParse(req.body);
    if (!parsed.success)
      throw badRequest(
        'body: expected {"run": "ID", "org"?: "KEY"} or {"learners": ["org:learnerId", ...]}, with "dryRun"?',
      );
    const body = parsed.data;
    const dryRun = body.dryRun === true;
    if ('run' in body) {
      const orgs = body.org ? [knownOrg(deps, body.org, 'org')] : deps.ctx.config.orgs;
      const summary = await cancelLearners(
        deps.ctx,
        { orgs, runId: body.run, dryRun, describe: `run ${body.run}` },
        actorOf(req),
      );
      return answer(summary);
    }
    const byOrg = learnersByOrg(deps, body.learners, 'learners');
    const learners: LearnerRef[] = [...byOrg].flatMap(([org, ids]) =>
      ids.map((learnerId) => ({ org, learnerId })),
    );
    const orgs = [...byOrg.keys()];
    const describe = `learners ${body.learners.slice(0, 10).join(',')}${body.learners.length > 10 ? ',...' : ''}`;
    return answer(await cancelLearners(deps.ctx, { orgs, learners, dryRun, describe }, actorOf(req)));
  });
}
