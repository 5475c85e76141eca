// GET /1/learner?page=N: every learner of the reseller (all organizations), 100 per page.
import type { FastifyInstance } from 'fastify';
import { PER_PAGE } from './defaults.ts';
import { bodies } from './bodies.ts';
import { identify, isAnswer, sleep, type SimContext } from './context.ts';
import { emit, type Answer } from './respond.ts';
import type { RequestRecord } from './types.ts';

/** Page numbers are positive integers; the first page when omitted (spec). */
function parsePage(raw: unknown): number | undefined {
  if (raw === undefined) return 1;
  if (typeof raw !== 'string' || !/^\d{1,9}$/.test(raw)) return undefined;
  const page = Number(raw);
  return page >= 1 ? page : undefined;
}

function list(ctx: SimContext, entry: RequestRecord, rawPage: unknown): Answer {
  const page = parsePage(rawPage);
  if (page === undefined) {
    // Errors for invalid page values are not shown in the spec: 400 with the error body shape.
    return {
      kind: 'json',
      status: 400,
      body: bodies.badRequest(`page must be a positive integer, got '${String(rawPage)}'`),
      result: 'bad-request',
    };
  }
  entry.page = page;
  const total = ctx.state.total;
  const start = (page - 1) * PER_PAGE;
  const data = ctx.state.slice(start, start + PER_PAGE);
  // Not shown in the spec: the order (ours is by id), and a page past the end (200, no items,
  // from/to null, as Laravel-style paginators do).
  return {
    kind: 'json',
    status: 200,
    result: 'listed',
    body: {
      data,
      pagination: {
        total,
        per_page: PER_PAGE,
        // A string in the spec's data: the page number as requested.
        current_page: String(page),
        last_page: Math.max(1, Math.ceil(total / PER_PAGE)),
        from: data.length > 0 ? start + 1 : null,
        to: data.length > 0 ? start + data.length : null,
      },
    },
  };
}

export function registerListRoute(app: FastifyInstance, ctx: SimContext): void {
  // The list operation is not rate limited (its limits are not shown in the spec) and never faulted
  // beyond latency: faults model the transfer's irreversible effect.
  app.get('/1/learner', async (request, reply) => {
    const entry = ctx.log.of(request.raw);
    await sleep(ctx.faults.latencyBefore());
    const who = identify(ctx, request);
    const answer = isAnswer(who) ? who : list(ctx, entry, (request.query as Record<string, unknown>).page);
    await sleep(ctx.faults.latencyAfter());
    emit(entry, request, reply, answer);
    return reply;
  });
}
