// One transfer, start to end: take the learner's lease with a permit (one step), check its record and
// claim, call the API, spool the response, record it (audit, outcome, permit, lease: one step), and tell
// BullMQ what to do next from the one outcome table. Tokens are looked up here, from this process's
// config, by the non-secret id the limiter chose; the job never carries one.
import { randomUUID } from 'node:crypto';
import { DelayedError, UnrecoverableError, Worker, type Job } from 'bullmq';
import type { LearnerApiClient } from '../api/client.ts';
import type { TransferOutcome } from '../api/outcome.ts';
import type { Config, TokenRef } from '../core/config.ts';
import type { TransferBudget } from '../limiter/index.ts';
import { POLICY_RECHECK_MS } from '../limiter/policy.ts';
import { scrubError, secretScrubber, type Logger } from '../core/log.ts';
import { MAX_RETRY_AFTER_MS } from '../api/retry-after.ts';
import { OUTCOMES, UNREACHABLE_STREAK } from '../outcomes/codes.ts';
import { decide } from '../outcomes/decide.ts';
import { isSuccessBucket, type Bucket } from '../outcomes/record.ts';
import type { FinishArgs, OutcomeStore } from '../outcomes/store.ts';
import { transferJobSchema, type TransferJob } from '../queue/job.ts';
import type { QueueSet } from '../queue/queues.ts';
import type { ClaimResult, Claims } from '../claims/claims.ts';
import type { OutcomeRecord } from '../outcomes/record.ts';
import type { Keys } from '../core/keys.ts';
import type { Recorder } from './recorder.ts';
import { auditEntryOf } from './audit-entry.ts';
import type { BodyArchive } from './body-archive.ts';
import { LearnerTransferError } from '../core/errors.ts';

export interface ProcessorDeps {
  config: Readonly<Config>;
  client: LearnerApiClient;
  budget: TransferBudget;
  store: OutcomeStore;
  claims: Claims;
  keys: Keys;
  queues: QueueSet;
  recorder: Recorder;
  /** Resolves when Redis takes writes (the write gate): no call is sent that could not be recorded. */
  waitWritable?: () => Promise<void>;
  /** After the permit and lease are taken: WAIT for a replica (redis/durability.ts), so a failover keeps them. */
  replicated?: (org: string) => Promise<unknown>;
  logger: Logger;
  /** Where the whole of an unreadable body is kept, beside the spool (only its prefix goes to Redis). */
  archive?: BodyArchive;
  /** Called after every recorded outcome (metrics, until-idle accounting, alerts). */
  onOutcome?: (event: OutcomeEvent) => void;
}

export interface OutcomeEvent {
  org: string;
  learnerId: number;
  runId: string;
  code: TransferOutcome['code'];
  bucket: Bucket;
  final: boolean;
  tokenId: string;
  durationMs: number;
}

/** What a finished job returns (kept by BullMQ only until removeOnComplete). */
export interface ProcessResult {
  code: 'transferred' | 'already-in-org';
  transferId: string | null;
}

/** Room left between a call's hard end and the in-flight deadline of its permit (clock rates, the abort). */
const HARD_MARGIN_MS = 250;

/** Less time than this left before the call's hard end: it is not sent (see the check before the call). */
const MIN_CALL_MS = 250;

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

/** First block of an unreachable service: the backoff, kept between 100 ms and 5 s; doubles up to a minute. */
function unreachableBlockMs(config: Readonly<Config>, level: number): number {
  const base = Math.max(100, Math.min(5_000, config.backoffMs));
  return Math.min(60_000, base * 2 ** Math.min(20, level - 1));
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

export function createProcessor(deps: ProcessorDeps) {
  const { config, client, budget, store, claims, keys, queues, recorder, logger } = deps;
  const tokensByOrg = new Map<string, TokenRef[]>();
  for (const t of config.tokens) tokensByOrg.set(t.org, [...(tokensByOrg.get(t.org) ?? []), t]);
  const lastAlert = new Map<string, number>();
  const lastPauseNote = new Map<string, number>();
  const scrub = secretScrubber(config.tokens.map((t) => t.secret));
  /**
   * Per organization: network errors in a row, how far the unreachable block has grown, when it ends,
   * and whether a job of this process is probing the service now (after a block, one request asks
   * whether it is back while the others wait: otherwise every concurrency slot would probe at once).
   */
  const unreachable = new Map<
    string,
    { streak: number; level: number; until: number; probe: Promise<void> | undefined }
  >();

  /** The org block (ms) when this outcome shows the service unreachable, else undefined. */
  const unreachableWait = (org: string, outcome: TransferOutcome): number | undefined => {
    if (outcome.code !== 'network-error') {
      unreachable.delete(org); // an answer: the service is reachable
      return undefined;
    }
    const s = unreachable.get(org) ?? { streak: 0, level: 0, until: 0, probe: undefined };
    unreachable.set(org, s);
    s.streak++;
    if (OUTCOMES[outcome.code].whenUnreachable !== 'wait-org') return undefined;
    if (outcome.maybeDelivered && s.streak < UNREACHABLE_STREAK) return undefined;
    const now = Date.now();
    // Requests in flight together fail together: only one sent after the last block ended grows it.
    if (now >= s.until) s.level++;
    const ms = unreachableBlockMs(config, s.level);
    s.until = Math.max(s.until, now + ms);
    return ms;
  };

  const processOne = async (job: Job<TransferJob>, jobToken?: string): Promise<ProcessResult> => {
    const parsed = transferJobSchema.safeParse(job.data);
    if (!parsed.success) {
      throw new UnrecoverableError(
        `malformed job ${job.id}: ${parsed.error.issues[0]?.message ?? 'invalid data'}`,
      );
    }
    const { org, learnerId, runId } = parsed.data;
    const tokens = tokensByOrg.get(org) ?? [];
    if (tokens.length === 0) {
      // This process has no token for the organization: leave the job for a process that has one.
      await queues.get(org).rateLimit(60_000);
      throw Worker.RateLimitError();
    }

    // After a block for an unreachable service, one job of this process asks whether it is back; the
    // others wait for that answer here, then go through acquire (which sees a renewed block if not).
    let probing: { state: { probe: Promise<void> | undefined }; end: () => void } | undefined;
    for (let down = unreachable.get(org); down && down.level > 0; down = unreachable.get(org)) {
      if (down.probe) {
        await down.probe;
        continue;
      }
      let end: () => void = () => {};
      down.probe = new Promise<void>((resolve) => (end = resolve));
      probing = { state: down, end };
      break;
    }
    try {
      // A job run again after its learner was done (a stall after the transfer was recorded, or a crash
      // before BullMQ completed it) ends here without spending budget. A re-open on purpose (retry,
      // reconcile) always sets the record back to queued first, so this never skips wanted work.
      const previous = await store.get(org, learnerId);
      if (previous && isSuccessBucket(previous.b as Bucket)) {
        logger.info(
          { org, learnerId, runId, state: previous.b },
          'job for a learner already done: completed without a call',
        );
        return { code: previous.b as ProcessResult['code'], transferId: previous.x ?? null };
      }

      // Send nothing that cannot be recorded: while Redis refuses writes, wait here.
      await deps.waitWritable?.();

      // The permit and the learner's lease in one step: at most one call in flight per learner, and
      // none from a job whose BullMQ lock is no longer this worker's.
      const holder = jobToken ?? `p${process.pid}-${randomUUID()}`;
      // The permit and the lease count the call in flight for the in-flight TTL from (no earlier than) here.
      const askedAt = performance.now();
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
      if (!permit.ok) {
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
        if (permit.scope === 'paused') {
          // Paused by an operator (`learner-transfer pause`): nothing is sent until `resume`, which the
          // next acquire sees (this sleep is bounded, see POLICY_RECHECK_MS). Said once a minute.
          const now = Date.now();
          if ((lastPauseNote.get(org) ?? 0) < now - 60_000) {
            lastPauseNote.set(org, now);
            logger.info(
              { org },
              `organization '${org}' is paused (or every token of it): no new transfer is sent until 'learner-transfer resume --org ${org}'`,
            );
          }
        } else if (permit.allBlockedIndefinitely) {
          const now = Date.now();
          if ((lastAlert.get(org) ?? 0) < now - 60_000) {
            lastAlert.set(org, now);
            logger.error(
              { org, tokens: tokens.map((t) => t.id) },
              `every token of organization '${org}' was refused (401): its transfers are paused until a valid token is configured`,
            );
          }
        }
        // Sleep until a permit can exist, but never longer than the policy recheck bound: a resume, a raised
        // limit, a smaller reserve or an unpaused token applies within seconds. While every token is refused
        // (401) or the organization is paused, waitMs is only a sentinel and this bound is the recheck.
        const waitMs = Math.min(permit.waitMs, POLICY_RECHECK_MS);
        await queues.get(org).rateLimit(Math.max(1, Math.ceil(waitMs)));
        throw Worker.RateLimitError();
      }
      // The permit and the lease must outlive a failover, or a promoted replica would grant them again.
      await deps.replicated?.(org);
      const ttls = budget.keyTtls;
      const permitOf = (mode: 'response' | 'abandon' | 'release') => ({
        tokenId: permit.tokenId,
        permitId: permit.permitId,
        mode,
        tokenKeyTtlMs: ttls.tokenMs,
        orgKeyTtlMs: ttls.orgMs,
      });
      /**
       * Ends an attempt that made no call (or whose call threw inside the client): the permit released
       * (or, with 'abandon', kept counted to its deadline) and the lease freed, with `update` recorded.
       */
      const endWithoutAnswer = (update?: FinishArgs['update'], mode: 'release' | 'abandon' = 'release') =>
        recorder.record(
          {
            org,
            learnerId,
            runId,
            at: Date.now(),
            attemptId: randomUUID(),
            permit: permitOf(mode),
            holder,
            ...(update ? { update } : {}),
          },
          false,
        );
      const giveBack = () => endWithoutAnswer();

      // With the lease held, the record and the claim are current: no other attempt can change them.
      // Until the call is sent, any failure gives the permit and the lease back.
      let current: OutcomeRecord | undefined;
      let claim: ClaimResult | undefined;
      try {
        [current, [claim]] = await Promise.all([
          store.get(org, learnerId),
          claims.claim([{ org, learnerId }]),
        ]);
      } catch (err) {
        await giveBack().catch(() => {});
        throw err;
      }
      if (current && isSuccessBucket(current.b as Bucket)) {
        await giveBack();
        logger.info(
          { org, learnerId, runId, state: current.b },
          'learner found done under its lease: no call',
        );
        return { code: current.b as ProcessResult['code'], transferId: current.x ?? null };
      }
      if (claim?.kind === 'held') {
        const message = `learner ${learnerId} is claimed by organization '${claim.holder}': nothing sent (move it back with --move)`;
        await endWithoutAnswer({ b: 'claimed-elsewhere', c: 'claimed-elsewhere', m: message, d: 0, n: 0 });
        logger.warn({ org, learnerId, runId, holder: claim.holder }, message);
        throw new UnrecoverableError(message);
      }

      const token = tokens.find((t) => t.id === permit.tokenId);
      if (!token) {
        await giveBack();
        throw new LearnerTransferError(
          'LT_INTERNAL',
          `limiter granted unknown token id ${permit.tokenId} for '${org}'`,
        );
      }
      // However long this process stalls, the call ends while its permit and lease still count it. A
      // call whose permit ran out before it could be sent (the process stalled between the permit and
      // the call) is not sent at all: the limiter already stopped counting it in flight, and the lease
      // may pass to another worker. The permit goes back; the learner waits without using an attempt.
      const hardMs = budget.options.inflightTtlMs - (performance.now() - askedAt) - HARD_MARGIN_MS;
      if (hardMs < MIN_CALL_MS) {
        await giveBack();
        logger.warn(
          { org, learnerId, runId, lateMs: Math.round(MIN_CALL_MS - hardMs) },
          "the permit's in-flight time ran out before the call could be sent (this process stalled): not sent, the learner waits without using an attempt",
        );
        await job.moveToDelayed(Date.now(), jobToken);
        throw new DelayedError();
      }
      let outcome: TransferOutcome;
      try {
        outcome = await client.transferLearner(learnerId, token.secret, {
          previousTransferId: current?.x,
          hardMs,
        });
      } catch (err) {
        // The client classifies every failure; reaching here is a bug. The request may have gone out
        // and be counted late: keep the permit counted to its deadline, and let BullMQ retry.
        await endWithoutAnswer(undefined, 'abandon');
        throw err;
      }

      const downBlockMs = unreachableWait(org, outcome);
      const attempt = job.attemptsMade + 1;
      const maxAttempts = job.opts.attempts ?? 1;
      const decision = decide(
        outcome.code,
        { attempt, maxAttempts },
        { unreachable: downBlockMs !== undefined },
      );
      const { action } = decision;
      const status = 'status' in outcome ? outcome.status : undefined;
      const rawError =
        'error' in outcome ? outcome.error : outcome.code === 'network-error' ? outcome.errorCode : undefined;
      const error = rawError === undefined ? undefined : scrub(rawError);
      // The service's own words go to Redis, reports and the dashboard: never with a token in them.
      const rawMessage = 'message' in outcome ? outcome.message : undefined;
      const message = rawMessage === undefined ? undefined : scrub(rawMessage);
      const result = 'result' in outcome ? outcome.result : undefined;

      let bucket: Bucket = decision.bucket;
      let final = decision.final;

      // A request that provably never left returns its budget. One that may have reached the server without
      // an answer (timeout, reset) may still be counted there later: it stays counted to its deadline.
      // Every answered request counts from its response.
      const mode =
        outcome.code === 'network-error' ? (outcome.maybeDelivered ? 'abandon' : 'release') : 'response';
      const attemptId = randomUUID();
      // A 200 that is not this learner's completed transfer carries a transfer id that may be another
      // learner's: it is kept in its own audit entry, never as this learner's transfer.
      const transferId =
        outcome.code === 'unexpected-result' ? undefined : result?.data.transferDetails.transferId;
      const audit = await auditEntryOf(
        outcome,
        { attemptId, transferId, org, learnerId },
        { scrub, archive: deps.archive, logger },
      );
      const recorded = await recorder.record(
        {
          org,
          learnerId,
          runId,
          at: Date.now(),
          attemptId,
          permit: permitOf(mode),
          holder,
          audit,
          update: {
            b: bucket,
            c: outcome.code,
            s: status,
            e: error,
            m: message,
            k: token.id,
            x: transferId,
            d: outcome.durationMs,
            n: decision.usesAttempt ? 1 : 0,
            ok: status === 200 && OUTCOMES[outcome.code].success ? 1 : 0,
            lost: permit.tookOver ? 1 : 0,
          },
        },
        audit !== undefined,
      );
      // The merge never turns a success back into a failure (a late answer after a repeat was recorded).
      if (isSuccessBucket(recorded.bucket) && !isSuccessBucket(bucket)) {
        bucket = recorded.bucket;
        final = true;
      }
      const logLine = {
        org,
        learnerId,
        runId,
        code: outcome.code,
        status,
        attempt,
        maxAttempts,
        durationMs: Math.round(outcome.durationMs),
        tokenId: token.id,
        final,
      };
      deps.onOutcome?.({
        org,
        learnerId,
        runId,
        code: outcome.code,
        bucket,
        final,
        tokenId: token.id,
        durationMs: outcome.durationMs,
      });

      if (final && isSuccessBucket(bucket) && action !== 'complete') {
        logger.info(
          { ...logLine, state: bucket },
          'transfer outcome (the learner was already recorded done)',
        );
        return { code: bucket as ProcessResult['code'], transferId: current?.x ?? null };
      }
      switch (action) {
        case 'complete':
          logger.info(logLine, 'transfer outcome');
          return {
            code: outcome.code as ProcessResult['code'],
            transferId: transferId ?? current?.x ?? null,
          };
        case 'fail':
          logger.warn({ ...logLine, error, message }, 'transfer outcome');
          throw new UnrecoverableError(scrub(describe(outcome)));
        case 'retry':
          logger.warn({ ...logLine, error, message }, 'transfer outcome');
          throw new LearnerTransferError('LT_ATTEMPT_FAILED', scrub(describe(outcome)));
        case 'wait': {
          if (downBlockMs !== undefined) {
            await budget.block(org, null, downBlockMs, 'unreachable');
            logger.warn(
              { ...logLine, error, message, blockMs: downBlockMs },
              `the service is unreachable for organization '${org}': its transfers wait ${downBlockMs} ms without using attempts`,
            );
            await job.moveToDelayed(Date.now(), jobToken);
            throw new DelayedError();
          }
          // The service is stricter than our limits: learn its real limit for the token (or the
          // organization) from what it accepted, for every process (learn.lua). The permit is settled
          // by now (recorded above), so the count sees it. Best effort: a failure only skips the lesson.
          const learned =
            outcome.code === 'rate-limited'
              ? await budget.learn(org, token.id, permit.permitId, tokens.length).catch((err: unknown) => {
                  logger.warn(
                    { org, tokenId: token.id, err: scrub((err as Error).message) },
                    'could not learn from a 429',
                  );
                  return undefined;
                })
              : undefined;
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
        case 'pause-token': {
          await budget.block(org, token.id, 'indefinite', '401');
          logger.error(
            { ...logLine },
            `token ${token.id} of organization '${org}' was refused (401): it is paused; fix LEARNER_API_TOKENS and run 'learner-transfer tokens unpause'`,
          );
          await job.moveToDelayed(Date.now(), jobToken);
          throw new DelayedError();
        }
      }
    } finally {
      // The probe's answer is in (an answer deleted the state; a failure renewed the block): release it.
      if (probing) {
        probing.state.probe = undefined;
        probing.end();
      }
    }
  };

  // Whatever a job throws, BullMQ keeps (failedReason, stacktrace, events): only scrubbed errors leave.
  return async function processTransfer(job: Job<TransferJob>, jobToken?: string): Promise<ProcessResult> {
    try {
      return await processOne(job, jobToken);
    } catch (err) {
      throw scrubError(err, scrub);
    }
  };
}
