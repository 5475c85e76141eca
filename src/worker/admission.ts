// Admission of one transfer job before any call: the permit and the learner's lease taken in one step,
// then the record and the claim checked under the lease. Every way out gives both back.
import { randomUUID } from 'node:crypto';
import { DelayedError, UnrecoverableError, Worker, type Job } from 'bullmq';
import type { TokenRef } from '../core/config.ts';
import { LearnerTransferError } from '../core/errors.ts';
import type { Refused } from '../limiter/index.ts';
import { POLICY_RECHECK_MS } from '../limiter/policy.ts';
import { CANCELLED, isSuccessBucket, type Bucket, type OutcomeRecord } from '../outcomes/record.ts';
import { transferJobSchema, type TransferJob } from '../queue/job.ts';
import type { ClaimResult } from '../claims/claims.ts';
import type { ProcessorContext, ProcessResult } from './processor-context.ts';
import { AttemptPermit } from './attempt-permit.ts';

/** A transfer job read: its learner, and this process's tokens for its organization. */
export interface TransferTarget {
  job: Job<TransferJob>;
  jobToken: string | undefined;
  org: string;
  learnerId: number;
  runId: string;
  tokens: readonly TokenRef[];
}

/** A job admitted to its call: its grant, the token chosen, the record as it was then. */
export interface Admitted extends TransferTarget {
  grant: AttemptPermit;
  token: TokenRef;
  current: OutcomeRecord | undefined;
}

/** The job's data; a job of an organization this process has no token for goes back to its queue. */
export async function readTransferJob(
  ctx: ProcessorContext,
  job: Job<TransferJob>,
  jobToken: string | undefined,
): Promise<TransferTarget> {
  const parsed = transferJobSchema.safeParse(job.data);
  if (!parsed.success) {
    throw new UnrecoverableError(
      `malformed job ${job.id}: ${parsed.error.issues[0]?.message ?? 'invalid data'}`,
    );
  }
  const { org, learnerId, runId } = parsed.data;
  const tokens = ctx.tokensByOrg.get(org) ?? [];
  if (tokens.length === 0) {
    // This process has no token for the organization: leave the job for a process that has one.
    await ctx.deps.queues.get(org).rateLimit(60_000);
    throw Worker.RateLimitError();
  }
  return { job, jobToken, org, learnerId, runId, tokens };
}

/**
 * The learner's result when its record says it is done, or cancelled by an operator (`cancel`: the job
 * ends with no call), else undefined.
 */
function doneResult(record: OutcomeRecord | undefined): ProcessResult | undefined {
  if (record?.b === CANCELLED) return { code: CANCELLED, transferId: null };
  if (!record || !isSuccessBucket(record.b as Bucket)) return undefined;
  return { code: record.b as ProcessResult['code'], transferId: record.x ?? null };
}

/** Admits the job to its call, or ends it with the learner's result when it is done already. */
export async function admit(
  ctx: ProcessorContext,
  target: TransferTarget,
): Promise<Admitted | ProcessResult> {
  const { deps } = ctx;
  const { org, learnerId, runId } = target;
  // A job run again after its learner was done, or cancelled while in this worker's hands, ends here
  // without a permit (a re-open on purpose sets the record back to queued first).
  const previous = await deps.store.get(org, learnerId);
  const done = doneResult(previous);
  if (done) {
    deps.logger.info(
      { org, learnerId, runId, state: previous?.b },
      done.code === CANCELLED
        ? 'job for a cancelled learner: completed without a call'
        : 'job for a learner already done: completed without a call',
    );
    return done;
  }

  // Send nothing that cannot be recorded: while Redis refuses writes, wait here.
  await deps.waitWritable?.();
  const grant = await takePermit(ctx, target);
  return checkUnderLease(ctx, target, grant);
}

/**
 * The permit and the learner's lease in one step: at most one call in flight per learner, and none from
 * a job whose BullMQ lock is no longer this worker's. Refused: the job waits (see waitForPermit).
 */
async function takePermit(ctx: ProcessorContext, target: TransferTarget): Promise<AttemptPermit> {
  const { config, budget, keys } = ctx.deps;
  const { job, jobToken, org, learnerId, runId, tokens } = target;
  const holder = jobToken ?? `p${process.pid}-${randomUUID()}`;
  // The permit and the lease count the call in flight for the in-flight TTL from (no earlier than) here.
  const askedAt = performance.now();
  // A budget event after this (a resume) is newer than a refusal of this acquire (lanes.ts).
  const askedAtMs = Date.now();
  const permit = await budget.acquire(
    org,
    tokens.map((t) => t.id),
    {
      learnerId,
      holder,
      lockKey: jobToken && job.id ? keys.jobLock(org, job.id) : '',
      lockToken: jobToken ?? '',
      graceMs: config.leaseGraceMs,
    },
  );
  if (!permit.ok) return waitForPermit(ctx, target, permit, askedAtMs);
  // The permit and the lease must outlive a failover, or a promoted replica would grant them again.
  await ctx.deps.replicated?.(org);
  const ttls = budget.keyTtls;
  return new AttemptPermit({
    recorder: ctx.deps.recorder,
    job: { org, learnerId, runId },
    permit,
    holder,
    askedAt,
    ttls,
  });
}

/** A refused permit: the job waits for the lease, or for the budget, or ends when its lock is lost. */
async function waitForPermit(
  ctx: ProcessorContext,
  target: TransferTarget,
  permit: Refused,
  askedAtMs: number,
): Promise<never> {
  const { logger, queues } = ctx.deps;
  const { job, jobToken, org, learnerId, runId } = target;
  if (permit.scope === 'lost-lock') {
    logger.warn(
      { org, learnerId, runId, jobId: job.id },
      'job lock lost before sending (another worker has the job): nothing sent',
    );
    throw new LearnerTransferError(
      'LT_ATTEMPT_FAILED',
      `job ${job.id} lost its lock before the call: nothing was sent`,
    );
  }
  if (permit.scope === 'lease') {
    // Another attempt holds the learner (in flight, or its response waits to be recorded): come
    // back when its lease ends, without using an attempt.
    logger.info(
      { org, learnerId, runId, waitMs: permit.waitMs },
      'learner lease held by another attempt: waiting for it',
    );
    await job.moveToDelayed(Date.now() + permit.waitMs, jobToken);
    throw new DelayedError();
  }
  sayWhyNoPermit(ctx, target, permit);
  // The dispatcher detaches the worker for the whole wait (woken when its permit frees, or by a limiter
  // event); otherwise the queue sleeps until a permit can exist, bounded by the policy recheck, so a
  // resume or a raised limit applies within seconds (paused or all 401: waitMs is only a sentinel).
  const indefinite = permit.scope === 'paused' || permit.allBlockedIndefinitely;
  ctx.deps.onRefused?.(org, permit.scope, indefinite);
  if (ctx.deps.onBudgetWait?.(org, permit.waitMs, indefinite, askedAtMs)) throw Worker.RateLimitError();
  const waitMs = Math.min(permit.waitMs, POLICY_RECHECK_MS);
  await queues.get(org).rateLimit(Math.max(1, Math.ceil(waitMs)));
  throw Worker.RateLimitError();
}

/**
 * An organization paused, or with every token refused (401), is said once a minute; one outside its run
 * window once per closed stretch.
 */
function sayWhyNoPermit(ctx: ProcessorContext, target: TransferTarget, permit: Refused): void {
  const { logger } = ctx.deps;
  const { org, tokens } = target;
  if (permit.scope === 'paused') {
    // Paused by an operator (`learner-transfer pause`): nothing is sent until `resume`, which the
    // next acquire sees (this sleep is bounded, see POLICY_RECHECK_MS). Said once a minute.
    const now = Date.now();
    if ((ctx.lastPauseNote.get(org) ?? 0) < now - 60_000) {
      ctx.lastPauseNote.set(org, now);
      logger.info(
        { org },
        `organization '${org}' is paused (or every token of it): no new transfer is sent until 'learner-transfer resume --org ${org}'`,
      );
    }
  } else if (permit.scope === 'run-window') {
    // Outside the organization's run window (`limits set --run-window`): the lane sleeps until it opens.
    // Said once per closed stretch (a wait that ends later than the one last said).
    const opensAt = Date.now() + permit.waitMs;
    const said = ctx.lastPauseNote.get(`${org}\u0000window`) ?? 0;
    if (opensAt > said + 60_000) {
      ctx.lastPauseNote.set(`${org}\u0000window`, opensAt);
      logger.info(
        { org, opensAt: new Date(opensAt).toISOString(), waitMs: permit.waitMs },
        `organization '${org}' is outside its run window: no transfer is sent before ${new Date(opensAt).toISOString()} (it opens then, or the window is checked again then)`,
      );
    }
  } else if (permit.allBlockedIndefinitely) {
    const now = Date.now();
    if ((ctx.lastAlert.get(org) ?? 0) < now - 60_000) {
      ctx.lastAlert.set(org, now);
      logger.error(
        { org, tokens: tokens.map((t) => t.id) },
        `every token of organization '${org}' was refused (401): its transfers are paused until a valid token is configured`,
      );
    }
  }
}

/**
 * With the lease held, the record and the claim are current: no other attempt can change them. Until
 * the call is sent, any failure gives the permit and the lease back.
 */
async function checkUnderLease(
  ctx: ProcessorContext,
  target: TransferTarget,
  grant: AttemptPermit,
): Promise<Admitted | ProcessResult> {
  const { store, claims, logger } = ctx.deps;
  const { org, learnerId, runId, tokens } = target;
  let current: OutcomeRecord | undefined;
  let claim: ClaimResult | undefined;
  try {
    [current, [claim]] = await Promise.all([store.get(org, learnerId), claims.claim([{ org, learnerId }])]);
  } catch (err) {
    await grant.giveBack().catch(() => {});
    throw err;
  }
  const done = doneResult(current);
  if (done?.code === CANCELLED) {
    // Cancelled after the first read, before this lease: cancel-learners.lua saw no lease and withdrew
    // it, so no call. The claim this check may have taken again is given back with the permit and lease.
    await grant.giveBack();
    await claims.release([{ org, learnerId }]);
    logger.info({ org, learnerId, runId }, 'learner found cancelled under its lease: no call');
    return done;
  }
  if (done) {
    await grant.giveBack();
    logger.info({ org, learnerId, runId, state: current?.b }, 'learner found done under its lease: no call');
    return done;
  }
  if (claim?.kind === 'elsewhere') {
    const message = `learner ${learnerId} is claimed by organization '${claim.holder}': nothing sent (move it back with --move)`;
    await grant.endWithoutAnswer({ b: 'claimed-elsewhere', c: 'claimed-elsewhere', m: message, d: 0, n: 0 });
    logger.warn({ org, learnerId, runId, holder: claim.holder }, message);
    throw new UnrecoverableError(message);
  }

  const token = tokens.find((t) => t.id === grant.permit.tokenId);
  if (!token) {
    await grant.giveBack();
    throw new LearnerTransferError(
      'LT_INTERNAL',
      `limiter granted unknown token id ${grant.permit.tokenId} for '${org}'`,
    );
  }
  return { ...target, grant, token, current };
}
