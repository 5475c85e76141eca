// POST /api/retry: `learner-transfer retry` from the dashboard, through the same selectRetry and
// requeueSelected; "dryRun" answers what the dialog shows. Outcomes a retry cannot help need
// "confirmPermanent": true, so a script cannot skip the confirmation either. Refused in read-only
// mode and to the viewer. GET /api/csrf gives scripts the token every POST needs.
import type { FastifyInstance } from 'fastify';
import * as z from 'zod';
import { failurePage } from '../../ops/views/failures.ts';
import {
  describeSelection,
  requeueSelected,
  selectRetry,
  type RetrySelection,
  type RetrySummary,
} from '../../ops/actions/retry.ts';
import { RETRY_NOTES, retryKind } from '../../ops/actions/retry-risk.ts';
import { actorOf } from '../auth.ts';
import { badRequest, DashboardError, learnersByOrg, type DashboardDeps } from '../deps.ts';
import { filterFields, toFailureFilter } from './failures-query.ts';

const MAX_SELECTED = 10_000;

const flags = { dryRun: z.boolean().optional(), confirmPermanent: z.boolean().optional() };
const bodySchema = z.union([
  z.object({ learners: z.array(z.string()).min(1).max(MAX_SELECTED), ...flags }).strict(),
  z.object({ all: z.literal(true), ...filterFields, ...flags }).strict(),
]);
type Body = z.infer<typeof bodySchema>;

/**
 * The answer: the summary, whether it was a dry run, and what a retry can do for each code that
 * needs the explicit confirmation (the dialog says it).
 */
export type RetryAnswer = RetrySummary & { dryRun: boolean; notes: Record<string, string> };

const notesOf = (s: RetrySummary) => Object.fromEntries(s.confirm.map((c) => [c, RETRY_NOTES[retryKind(c)]]));

function merge(into: RetrySelection, more: RetrySelection): void {
  into.items.push(...more.items);
  into.skipped.push(...more.skipped);
}

/** The learners a body names or matches, read now; and the filter as the change log tells it. */
async function select(
  deps: DashboardDeps,
  body: Body,
): Promise<{ selection: RetrySelection; filter: Record<string, unknown> }> {
  const { ctx } = deps;
  const selection: RetrySelection = { items: [], skipped: [] };
  if ('learners' in body) {
    const byOrg = learnersByOrg(deps, body.learners, 'learners');
    for (const [org, learnerIds] of byOrg)
      merge(selection, await selectRetry(ctx, { orgs: [org], learnerIds }));
    return { selection, filter: { learners: body.learners.length } };
  }
  const filter = await toFailureFilter(deps, body);
  const text = { code: filter.code, orgs: filter.orgs, run: filter.runId, learner: filter.learnerId };
  if (filter.learnerId !== undefined) {
    // Only the organizations where this learner is a matching failure.
    const { items } = await failurePage(ctx.store, filter, 0, filter.orgs.length);
    for (const l of items)
      merge(selection, await selectRetry(ctx, { orgs: [l.org], learnerIds: [l.learnerId] }));
  } else {
    merge(selection, await selectRetry(ctx, { orgs: filter.orgs, status: filter.code, runId: filter.runId }));
  }
  return { selection, filter: JSON.parse(JSON.stringify(text)) as Record<string, unknown> };
}

/** The refusal of a retry that needs the explicit confirmation: codes, counts, what to send. */
function confirmationRequired(s: RetrySummary): DashboardError {
  const parts = s.confirm.map((c) => `${s.byCode[c]} ${c}`).join(', ');
  const kinds = [...new Set(s.confirm.map((c) => retryKind(c)))].map((k) => RETRY_NOTES[k]).join('; ');
  return new DashboardError(
    'LT_HTTP_CONFIRM_PERMANENT',
    `confirmPermanent: required to retry ${parts} (${kinds}); send "confirmPermanent": true to retry them anyway, or narrow the filter`,
  );
}

export function registerRetry(app: FastifyInstance, deps: DashboardDeps): void {
  const { ctx } = deps;
  app.get('/api/csrf', async () => ({ token: deps.csrf.issue(), header: 'x-csrf-token' }));

  app.post('/api/retry', async (req): Promise<RetryAnswer> => {
    if (deps.readOnly)
      throw new DashboardError('LT_HTTP_READ_ONLY', 'this dashboard runs with --read-only: retries are off');
    const parsed = bodySchema.safeParse(req.body);
    if (!parsed.success) {
      throw badRequest(
        'body: expected {"learners": ["org:learnerId", ...]} or {"all": true, "code"?, "org"?, "run"?, "q"?}, ' +
          'each with "dryRun"? and "confirmPermanent"? (true or false)',
      );
    }
    const body = parsed.data;
    const { selection, filter } = await select(deps, body);
    const planned = describeSelection(selection);
    if (body.dryRun === true) return { ...planned, dryRun: true, notes: notesOf(planned) };
    if (planned.confirm.length > 0 && body.confirmPermanent !== true) throw confirmationRequired(planned);
    const who = actorOf(req);
    const summary = await requeueSelected(ctx, selection, { who, filter });
    ctx.logger.info(
      { ...filter, requeued: summary.requeued, byCode: summary.byCode, who },
      'dashboard retry',
    );
    return { ...summary, dryRun: false, notes: notesOf(summary) };
  });
}
