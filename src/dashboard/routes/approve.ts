// POST /api/approve: `learner-transfer approve --run ID` from the dashboard, with the dashboard's
// author in the change log; "dryRun" answers the count the dialog shows. Refused in read-only
// mode and to the viewer.
import type { FastifyInstance } from 'fastify';
import * as z from 'zod';
import { approveRun, type ApproveSummary } from '../../ops/actions/canary.ts';
import { actorOf } from '../auth.ts';
import { badRequest, DashboardError, type DashboardDeps } from '../deps.ts';
import { LearnerTransferError } from '../../core/errors.ts';

const bodySchema = z.object({ run: z.string().min(1).max(200), dryRun: z.boolean().optional() }).strict();

/** The summary, and what the confirmation dialog reads (`matched`, `byCode`, `confirm`). */
export type ApproveAnswer = ApproveSummary & {
  matched: number;
  byCode: Record<string, number>;
  confirm: string[];
};

export function registerApprove(app: FastifyInstance, deps: DashboardDeps): void {
  app.post('/api/approve', async (req) => {
    if (deps.readOnly)
      throw new DashboardError('LT_HTTP_READ_ONLY', 'this dashboard runs with --read-only: approving is off');
    const parsed = bodySchema.safeParse(req.body);
    if (!parsed.success) throw badRequest('body: expected {"run": "ID"}, with "dryRun"?');
    const { run, dryRun } = parsed.data;
    try {
      const s = await approveRun(deps.ctx, run, actorOf(req), { dryRun: dryRun === true });
      const byCode: Record<string, number> = s.released > 0 ? { 'awaiting approval': s.released } : {};
      return { ...s, matched: s.released, byCode, confirm: [] } satisfies ApproveAnswer;
    } catch (err) {
      // An unknown run, or one without a canary: the client's mistake, said as the CLI says it.
      if (err instanceof LearnerTransferError && err.code === 'LT_USAGE') throw badRequest(err.message);
      throw err;
    }
  });
}
