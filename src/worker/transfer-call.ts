// The call of an admitted transfer: sent only while its permit and lease still count it in flight, and
// bounded so that it ends before they stop counting it.
import { DelayedError } from 'bullmq';
import type { TransferOutcome } from '../api/outcome.ts';
import type { Admitted } from './admission.ts';
import type { ProcessorContext } from './processor-context.ts';

/** Room left between a call's hard end and the in-flight deadline of its permit (clock rates, the abort). */
const HARD_MARGIN_MS = 250;

export async function sendTransfer(ctx: ProcessorContext, admitted: Admitted): Promise<TransferOutcome> {
  const { client, budget } = ctx.deps;
  const { learnerId, grant, token, current } = admitted;
  // Decision 14: the call ends while its permit and lease still count it, and is sent only while a whole
  // REQUEST_TIMEOUT of them is left (checked as it writes, send-gate.ts); once written, it gets its whole
  // timeout. A call too late to send is not sent: the permit goes back, no attempt used.
  const hardMs = budget.options.inflightTtlMs - (performance.now() - grant.askedAt) - HARD_MARGIN_MS;
  const sendWithinMs = hardMs - ctx.deps.config.requestTimeoutMs;
  let outcome: TransferOutcome;
  try {
    outcome = await client.transferLearner(learnerId, token.secret, {
      previousTransferId: current?.x,
      hardMs,
      sendWithinMs,
    });
  } catch (err) {
    // The client classifies every failure; reaching here is a bug. The request may have gone out
    // and be counted late: keep the permit counted to its deadline, and let BullMQ retry.
    await grant.endWithoutAnswer(undefined, 'abandon');
    throw err;
  }
  if (outcome.code === 'network-error' && outcome.errorCode === 'LT_NOT_SENT') {
    return notSent(ctx, admitted, Math.round(outcome.durationMs - sendWithinMs), outcome.message);
  }
  return outcome;
}

/** Not sent: the permit and lease go back, and the learner waits without using an attempt. */
async function notSent(
  ctx: ProcessorContext,
  admitted: Admitted,
  lateMs: number,
  why: string,
): Promise<never> {
  const { job, jobToken, org, learnerId, runId, grant } = admitted;
  await grant.giveBack();
  ctx.deps.logger.warn(
    { org, learnerId, runId, lateMs, why },
    "the permit's in-flight time ran out before the call could be sent (this process stalled, or no connection was ready in time): not sent, the learner waits without using an attempt",
  );
  await job.moveToDelayed(Date.now(), jobToken);
  throw new DelayedError();
}
