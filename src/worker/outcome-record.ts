// One answer of the service, decided from the outcome table and recorded in the one finish step
// (decision 9), scrubbed of tokens.
import { randomUUID } from 'node:crypto';
import type { TransferOutcome } from '../api/outcome.ts';
import type { Scrub } from '../core/log.ts';
import { OUTCOMES } from '../outcomes/codes.ts';
import { decide, type Decision } from '../outcomes/decide.ts';
import { isSuccessBucket, type Bucket } from '../outcomes/record.ts';
import type { FinishResult } from '../outcomes/store.ts';
import type { Admitted } from './admission.ts';
import { auditEntryOf } from './audit-entry.ts';
import type { ProcessorContext } from './processor-context.ts';

/** The answer's fields as they are recorded and logged: the service's own words scrubbed. */
interface AnswerFields {
  status: number | undefined;
  error: string | undefined;
  message: string | undefined;
  transferId: string | undefined;
}

/** An answer recorded: what the BullMQ action needs to know of it. */
export interface RecordedOutcome {
  outcome: TransferOutcome;
  action: Decision['action'];
  /** The learner's bucket and finality after the record (a success already recorded stays one). */
  bucket: Bucket;
  final: boolean;
  /** The organization's block (ms) when the answer shows the service unreachable. */
  downBlockMs: number | undefined;
  /** The call was the one probe of a 5xx storm: an answer that would be retried waits, with no attempt. */
  probe: boolean;
  transferId: string | undefined;
  error: string | undefined;
  message: string | undefined;
  /** The fields of the log line of this outcome. */
  logLine: {
    org: string;
    learnerId: number;
    runId: string;
    code: TransferOutcome['code'];
    status: number | undefined;
    attempt: number;
    maxAttempts: number;
    durationMs: number;
    tokenId: string;
    final: boolean;
  };
}

export async function recordOutcome(
  ctx: ProcessorContext,
  admitted: Admitted,
  outcome: TransferOutcome,
): Promise<RecordedOutcome> {
  const { org, learnerId, runId, job, token } = admitted;
  const downBlockMs = ctx.unreachable.blockMsAfter(org, outcome);
  const attempt = job.attemptsMade + 1;
  const maxAttempts = job.opts.attempts ?? 1;
  const probe = admitted.grant.permit.probe === true;
  const decision = decide(
    outcome.code,
    { attempt, maxAttempts },
    { unreachable: downBlockMs !== undefined, probe },
  );
  const fields = answerFields(outcome, ctx.scrub);
  const recorded = await writeAnswer(ctx, admitted, outcome, decision, fields);
  let bucket: Bucket = decision.bucket;
  let final = decision.final;
  // The merge never turns a success back into a failure (a late answer after a repeat was recorded).
  if (isSuccessBucket(recorded.bucket) && !isSuccessBucket(bucket)) {
    bucket = recorded.bucket;
    final = true;
  }
  const { status, error, message, transferId } = fields;
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
  ctx.deps.onOutcome?.({
    org,
    learnerId,
    runId,
    code: outcome.code,
    bucket,
    final,
    tokenId: token.id,
    durationMs: outcome.durationMs,
  });
  return {
    outcome,
    action: decision.action,
    bucket,
    final,
    downBlockMs,
    probe,
    transferId,
    error,
    message,
    logLine,
  };
}

function answerFields(outcome: TransferOutcome, scrub: Scrub): AnswerFields {
  const status = 'status' in outcome ? outcome.status : undefined;
  const rawError =
    'error' in outcome ? outcome.error : outcome.code === 'network-error' ? outcome.errorCode : undefined;
  const error = rawError === undefined ? undefined : scrub(rawError);
  // The service's own words go to Redis, reports and the dashboard: never with a token in them.
  const rawMessage = 'message' in outcome ? outcome.message : undefined;
  const message = rawMessage === undefined ? undefined : scrub(rawMessage);
  const result = 'result' in outcome ? outcome.result : undefined;
  // A 200 that is not this learner's completed transfer carries a transfer id that may be another
  // learner's: it is kept in its own audit entry, never as this learner's transfer.
  const transferId =
    outcome.code === 'unexpected-result' ? undefined : result?.data.transferDetails.transferId;
  return { status, error, message, transferId };
}

/** The audit entry, the record, the permit and the lease, spooled first when it may matter. */
async function writeAnswer(
  ctx: ProcessorContext,
  admitted: Admitted,
  outcome: TransferOutcome,
  decision: Decision,
  fields: AnswerFields,
): Promise<FinishResult> {
  const { recorder, archive, logger } = ctx.deps;
  const { org, learnerId, runId, grant, token } = admitted;
  const { status, error, message, transferId } = fields;
  // A request that provably never left returns its budget. One that may have reached the server without
  // an answer (timeout, reset) may still be counted there later: it stays counted to its deadline.
  // Every answered request counts from its response.
  const mode =
    outcome.code === 'network-error' ? (outcome.maybeDelivered ? 'abandon' : 'release') : 'response';
  const attemptId = randomUUID();
  const audit = await auditEntryOf(
    outcome,
    { attemptId, transferId, org, learnerId },
    { scrub: ctx.scrub, archive, logger },
  );
  return recorder.record(
    {
      org,
      learnerId,
      runId,
      at: Date.now(),
      attemptId,
      permit: grant.settled(mode),
      holder: grant.holder,
      audit,
      update: {
        b: decision.bucket,
        c: outcome.code,
        s: status,
        e: error,
        m: message,
        k: token.id,
        x: transferId,
        d: outcome.durationMs,
        n: decision.usesAttempt ? 1 : 0,
        ok: status === 200 && OUTCOMES[outcome.code].success ? 1 : 0,
        lost: grant.permit.tookOver ? 1 : 0,
      },
    },
    audit !== undefined,
  );
}
