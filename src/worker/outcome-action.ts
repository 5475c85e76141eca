// What BullMQ does with a job once its answer is recorded, from the outcome table: complete, fail,
// retry, or put it back without an attempt.
import { DelayedError, UnrecoverableError } from 'bullmq';
import type { TransferOutcome } from '../api/outcome.ts';
import { MAX_RETRY_AFTER_MS } from '../api/retry-after.ts';
import { LearnerTransferError } from '../core/errors.ts';
import type { LearnResult, TransferBudget } from '../limiter/index.ts';
import { isSuccessBucket } from '../outcomes/record.ts';
import type { Admitted } from './admission.ts';
import type { RecordedOutcome } from './outcome-record.ts';
import type { ProcessorContext, ProcessResult } from './processor-context.ts';

/**
 * How long a token is blocked after a 429 without Retry-After: a tenth of its window (the window in
 * effect, from the policy in Redis), at most a minute.
 */
async function defaultBlockMs(budget: TransferBudget, org: string, tokenId: string): Promise<number> {
  const rate = await budget
    .limits(org)
    .then((l) => l.token(tokenId))
    .catch(() => budget.options.limitPerToken);
  return Math.max(100, Math.min(60_000, Math.floor(rate.windowMs / 10)));
}

function describe(outcome: TransferOutcome): string {
  const status = 'status' in outcome ? ` ${outcome.status}` : '';
  const detail =
    outcome.code === 'network-error'
      ? `${outcome.errorCode}: ${outcome.message}`
      : 'message' in outcome && outcome.message
        ? `${'error' in outcome && outcome.error ? `${outcome.error}: ` : ''}${outcome.message}`
        : '';
  return `${outcome.code}${status}${detail ? ` (${detail})` : ''}`;
}

export async function actOnOutcome(
  ctx: ProcessorContext,
  admitted: Admitted,
  recorded: RecordedOutcome,
): Promise<ProcessResult> {
  const { logger } = ctx.deps;
  const { scrub } = ctx;
  const { outcome, action, bucket, final, transferId, error, message, logLine } = recorded;
  if (final && isSuccessBucket(bucket) && action !== 'complete') {
    logger.info({ ...logLine, state: bucket }, 'transfer outcome (the learner was already recorded done)');
    return { code: bucket as ProcessResult['code'], transferId: admitted.current?.x ?? null };
  }
  switch (action) {
    case 'complete':
      logger.info(logLine, 'transfer outcome');
      return {
        code: outcome.code as ProcessResult['code'],
        transferId: transferId ?? admitted.current?.x ?? null,
      };
    case 'fail':
      logger.warn({ ...logLine, error, message }, 'transfer outcome');
      throw new UnrecoverableError(scrub(describe(outcome)));
    case 'retry':
      logger.warn({ ...logLine, error, message }, 'transfer outcome');
      throw new LearnerTransferError('LT_ATTEMPT_FAILED', scrub(describe(outcome)));
    case 'wait':
      if (recorded.probe && recorded.downBlockMs === undefined) return afterProbe(ctx, admitted, recorded);
      if (recorded.downBlockMs !== undefined)
        return waitForService(ctx, admitted, recorded, recorded.downBlockMs);
      return waitAfter429(ctx, admitted, recorded);
    case 'pause-token':
      return pauseToken(ctx, admitted, recorded);
  }
}

/**
 * The one probe of a 5xx storm failed again: the learner goes back without using an attempt, and the
 * next probe waits for the gap (judge-outcome.lua), not the budget of every waiting learner.
 */
async function afterProbe(
  ctx: ProcessorContext,
  admitted: Admitted,
  recorded: RecordedOutcome,
): Promise<never> {
  const { org, job, jobToken } = admitted;
  ctx.deps.logger.warn(
    { ...recorded.logLine, error: recorded.error, message: recorded.message, probe: true },
    `organization '${org}' is in a storm of server errors: one call at a time probes the service, and this learner waits without using an attempt`,
  );
  await job.moveToDelayed(Date.now(), jobToken);
  throw new DelayedError();
}

/** The service is unreachable for the organization: all its transfers wait, without using attempts. */
async function waitForService(
  ctx: ProcessorContext,
  admitted: Admitted,
  recorded: RecordedOutcome,
  downBlockMs: number,
): Promise<never> {
  const { org, job, jobToken } = admitted;
  const { logLine, error, message } = recorded;
  await ctx.deps.budget.block(org, null, downBlockMs, 'unreachable');
  ctx.deps.logger.warn(
    { ...logLine, error, message, blockMs: downBlockMs },
    `the service is unreachable for organization '${org}': its transfers wait ${downBlockMs} ms without using attempts`,
  );
  await job.moveToDelayed(Date.now(), jobToken);
  throw new DelayedError();
}

/** The token is blocked until Retry-After (learning the service's limit from a 429); the learner waits. */
async function waitAfter429(
  ctx: ProcessorContext,
  admitted: Admitted,
  recorded: RecordedOutcome,
): Promise<never> {
  const { budget, logger } = ctx.deps;
  const { org, token, job, jobToken } = admitted;
  const { outcome, logLine } = recorded;
  const learned = outcome.code === 'rate-limited' ? await learnFrom429(ctx, admitted) : undefined;
  const ms =
    outcome.code === 'rate-limited' && outcome.retryAfterMs !== undefined
      ? Math.min(outcome.retryAfterMs, MAX_RETRY_AFTER_MS)
      : await defaultBlockMs(budget, org, token.id);
  await budget.block(org, token.id, Math.max(1, ms), '429');
  logger.warn(
    {
      ...logLine,
      blockMs: ms,
      ...(learned
        ? {
            rateLimited: learned.rateLimited,
            accepted: learned.token.accepted,
            limit: learned.token.limit,
            ...(learned.token.learned !== null ? { learnedTokenLimit: learned.token.learned } : {}),
            ...(learned.org.learned !== null ? { learnedOrgLimit: learned.org.learned } : {}),
          }
        : {}),
    },
    learned?.token.learned != null || learned?.org.learned != null
      ? `the service answered 429 below our limit: learned ${
          learned.org.learned !== null
            ? `organization '${org}' limit ${learned.org.learned}`
            : `token ${token.id} limit ${learned.token.learned}`
        } per window for every worker (probed back up slowly); token blocked until Retry-After, the learner waits without losing an attempt`
      : 'the service answered 429: token blocked until Retry-After; the learner waits without losing an attempt',
  );
  // Back to the queue at once without an attempt; the next acquire picks another token or waits.
  await job.moveToDelayed(Date.now(), jobToken);
  throw new DelayedError();
}

/**
 * The service is stricter than our limits: learn its real limit for the token (or the organization)
 * from what it accepted, for every process (learn.lua). The permit is settled by now (recorded before
 * this), so the count sees it. Best effort: a failure only skips the lesson.
 */
function learnFrom429(ctx: ProcessorContext, admitted: Admitted): Promise<LearnResult | undefined> {
  const { org, token, grant, tokens } = admitted;
  return ctx.deps.budget.learn(org, token.id, grant.permit.permitId, tokens.length).catch((err: unknown) => {
    ctx.deps.logger.warn(
      { org, tokenId: token.id, err: ctx.scrub((err as Error).message) },
      'could not learn from a 429',
    );
    return undefined;
  });
}

/** The token was refused (401): it is paused until an operator unpauses it; the learner waits. */
async function pauseToken(
  ctx: ProcessorContext,
  admitted: Admitted,
  recorded: RecordedOutcome,
): Promise<never> {
  const { org, token, job, jobToken } = admitted;
  await ctx.deps.budget.block(org, token.id, 'indefinite', '401');
  ctx.deps.logger.error(
    { ...recorded.logLine },
    `token ${token.id} of organization '${org}' was refused (401): it is paused; fix LEARNER_API_TOKENS and run 'learner-transfer tokens unpause'`,
  );
  await job.moveToDelayed(Date.now(), jobToken);
  throw new DelayedError();
}
