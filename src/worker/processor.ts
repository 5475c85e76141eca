// One transfer, start to end: take the learner's lease with a permit (one step), check its record and
// claim, call the API, spool the response, record it (audit, outcome, permit, lease: one step), and tell
// BullMQ what to do next from the one outcome table. Each step is its own file: admission.ts (the job, the
// permit, the lease, the claim), transfer-call.ts (the call), outcome-record.ts (decide and record) and
// outcome-action.ts (what BullMQ does next). With tracing on, each attempt is a span with the permit, the
// call and the record as its children (docs/tracing.md); off, the spans are the API's no-op ones.
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
