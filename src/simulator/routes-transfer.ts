// PATCH /1/learner/{learnerId}/transfer. Checks in order: token (401), limits (429, the only
// refusal that uses no budget), one seeded fault roll, permission (403), learner (404), the
// always-failing learners (500), then the repeat rule for a learner already in the organization.
import type { FastifyInstance } from 'fastify';
import { formatDuration } from '../core/duration.ts';
import { bodies } from './bodies.ts';
import { identify, isAnswer, sleep, type SimContext } from './context.ts';
import { emit, type Answer } from './respond.ts';
import type { TokenInfo } from './tokens.ts';
import type { FaultKind, RequestRecord } from './types.ts';

function rateLimited(ctx: SimContext, retryAfterMs: number, scope: 'token' | 'org'): Answer {
  const limits = ctx.limiter.current;
  const rate = scope === 'token' ? limits?.perToken : limits?.perOrg;
  const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000));
  const what = rate ? `${rate.max} transfer requests per ${formatDuration(rate.windowMs)}` : 'the limit';
  return {
    kind: 'json',
    status: 429,
    result: 'rate-limited',
    headers: { 'retry-after': String(seconds) },
    body: bodies.tooManyRequests(
      `Rate limit of ${what} per ${scope === 'token' ? 'API token' : 'organization'} exceeded; retry after ${seconds} s`,
    ),
  };
}

/** The answer of a counted transfer without a fault, or with one that needs the real outcome. */
function transfer(ctx: SimContext, who: TokenInfo, learnerId: number | undefined, rawId: string): Answer {
  if (!who.canTransfer || (learnerId !== undefined && ctx.forbidden.has(learnerId))) {
    return { kind: 'json', status: 403, body: bodies.forbidden(), result: 'forbidden' };
  }
  if (learnerId !== undefined && ctx.failing.has(learnerId)) {
    return { kind: 'json', status: 500, body: bodies.transferFailed(), result: 'server-error' };
  }
  // A non-numeric id is answered like an unknown one (invalid ids are not shown in the spec).
  if (learnerId === undefined)
    return { kind: 'json', status: 404, body: bodies.notFound(rawId), result: 'not-found' };
  const repeat =
    ctx.repeatMode === 'mixed' ? (ctx.repeatRandom.chance(0.5) ? 'success' : 'error') : ctx.repeatMode;
  const outcome = ctx.state.transfer(learnerId, who.org, repeat);
  switch (outcome.kind) {
    case 'not-found':
      return { kind: 'json', status: 404, body: bodies.notFound(learnerId), result: 'not-found' };
    case 'already-in-org':
      return { kind: 'json', status: 400, body: bodies.alreadyInOrg(), result: 'already-in-org' };
    case 'repeat-success':
      return { kind: 'json', status: 200, body: outcome.body, result: 'repeat-success' };
    case 'transferred':
      return { kind: 'json', status: 200, body: outcome.body, result: 'transferred', effectApplied: true };
  }
}

/** Applies the rolled fault to the normal course of a counted request. */
function withFault(ctx: SimContext, fault: FaultKind | undefined, run: () => Answer): Answer {
  if (fault === 'error') {
    return { kind: 'json', status: 500, body: bodies.transferFailed(), result: 'server-error', fault };
  }
  if (fault === 'reset-before') return { kind: 'reset', fault };
  const answer = run();
  if (fault === 'reset-after') {
    return {
      kind: 'reset',
      fault,
      ...(answer.result ? { result: answer.result } : {}),
      effectApplied: answer.effectApplied === true,
    };
  }
  // Truncation cuts a 200 only: the share is of transfers that took effect (or answered a repeat).
  if (fault === 'truncate' && answer.kind === 'json' && answer.status === 200) return { ...answer, fault };
  return answer;
}

function handle(
  ctx: SimContext,
  entry: RequestRecord,
  who: TokenInfo,
  learnerId: number | undefined,
  rawId: string,
): Answer {
  const now = Date.now();
  const admission = ctx.limiter.admit(who.label, who.org.key, now);
  if (!admission.ok) return rateLimited(ctx, admission.retryAfterMs, admission.scope);
  entry.countedAt = now;
  return withFault(ctx, ctx.faults.pick(), () => transfer(ctx, who, learnerId, rawId));
}

export function registerTransferRoute(app: FastifyInstance, ctx: SimContext): void {
  // The body is `{}` (or empty); no other fields are defined by the spec, so any JSON is accepted.
  app.patch('/1/learner/:learnerId/transfer', async (request, reply) => {
    const entry = ctx.log.of(request.raw);
    await sleep(ctx.faults.latencyBefore());
    const rawId = (request.params as { learnerId: string }).learnerId;
    const learnerId = /^\d{1,15}$/.test(rawId) ? Number(rawId) : undefined;
    if (learnerId !== undefined) entry.learnerId = learnerId;
    const who = identify(ctx, request);
    const answer = isAnswer(who) ? who : handle(ctx, entry, who, learnerId, rawId);
    await sleep(ctx.faults.latencyAfter());
    while (ctx.answersHeld) await ctx.answersHeld;
    emit(entry, request, reply, answer);
    return reply;
  });
}
