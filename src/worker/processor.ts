// One transfer, start to end: admission.ts, transfer-call.ts, outcome-record.ts, outcome-action.ts, each
// attempt a span when tracing is on (docs/tracing.md).
import type { Job } from 'bullmq';
import { scrubError } from '../core/log.ts';
import { inSpan, SPAN_ATTR, type Span } from '../core/tracing.ts';
import type { TransferJob } from '../queue/job.ts';
import { admit, readTransferJob } from './admission.ts';
import { sendTransfer } from './transfer-call.ts';
import { recordOutcome } from './outcome-record.ts';
import { actOnOutcome } from './outcome-action.ts';
import { noteForBreaker } from './breaker-note.ts';
import {
  processorContext,
  type ProcessorContext,
  type ProcessorDeps,
  type ProcessResult,
} from './processor-context.ts';

async function processOne(
  ctx: ProcessorContext,
  job: Job<TransferJob>,
  jobToken: string | undefined,
  span: Span,
): Promise<ProcessResult> {
  const target = await readTransferJob(ctx, job, jobToken);
  span.setAttributes({
    [SPAN_ATTR.org]: target.org,
    [SPAN_ATTR.learnerId]: target.learnerId,
    [SPAN_ATTR.runId]: target.runId,
  });
  const probe = await ctx.unreachable.awaitProbe(target.org);
  const { scrub } = ctx;
  try {
    const admission = await inSpan(
      'transfer.permit',
      {},
      (permitSpan) =>
        admit(ctx, target).then((a) => {
          // The admission's end: admitted to the call, or the learner's result without one.
          permitSpan.setAttribute(SPAN_ATTR.admission, 'grant' in a ? 'admitted' : a.code);
          return a;
        }),
      { scrub },
    );
    if (!('grant' in admission)) {
      span.setAttribute(SPAN_ATTR.outcome, admission.code);
      return admission;
    }
    span.setAttribute(SPAN_ATTR.tokenId, admission.token.id);
    const outcome = await sendTransfer(ctx, admission);
    span.setAttribute(SPAN_ATTR.outcome, outcome.code);
    if ('status' in outcome) span.setAttribute(SPAN_ATTR.httpStatus, outcome.status);
    const recorded = await inSpan(
      'transfer.record',
      { [SPAN_ATTR.outcome]: outcome.code },
      async (recordSpan) => {
        const r = await recordOutcome(ctx, admission, outcome);
        recordSpan.setAttributes({ [SPAN_ATTR.bucket]: r.bucket, [SPAN_ATTR.final]: r.final });
        return r;
      },
      { scrub },
    );
    span.setAttributes({ [SPAN_ATTR.bucket]: recorded.bucket, [SPAN_ATTR.final]: recorded.final });
    // The error budget hears the answer before BullMQ acts on it: a halt holds from the next acquire.
    await noteForBreaker(ctx, admission, recorded);
    if (recorded.final && target.job.data.canary === 1) await canaryFinal(ctx, target.org, target.runId);
    return await actOnOutcome(ctx, admission, recorded);
  } finally {
    // The probe's answer is in (an answer deleted the state; a failure renewed the block): release it.
    probe?.release();
  }
}

/** The run's auto-approval look after a canary learner's final outcome; its failure costs the job nothing. */
async function canaryFinal(ctx: ProcessorContext, org: string, runId: string): Promise<void> {
  try {
    await ctx.deps.onCanaryFinal?.(org, runId);
  } catch (err) {
    ctx.deps.logger.warn(
      { org, runId, err: ctx.scrub((err as Error).message) },
      'canary: the auto-approval look failed (approve --run releases the rest)',
    );
  }
}

export function createProcessor(deps: ProcessorDeps) {
  const ctx = processorContext(deps);
  // Whatever a job throws, BullMQ keeps (failedReason, stacktrace, events): only scrubbed errors leave.
  return async function processTransfer(job: Job<TransferJob>, jobToken?: string): Promise<ProcessResult> {
    return inSpan(
      'transfer.attempt',
      { [SPAN_ATTR.jobId]: job.id ?? '', [SPAN_ATTR.attempt]: job.attemptsMade + 1 },
      async (span) => {
        try {
          return await processOne(ctx, job, jobToken, span);
        } catch (err) {
          throw scrubError(err, ctx.scrub);
        }
      },
      { scrub: ctx.scrub },
    );
  };
}
