// One transfer, start to end: take the learner's lease with a permit (one step), check its record and
// claim, call the API, spool the response, record it (audit, outcome, permit, lease: one step), and tell
// BullMQ what to do next from the one outcome table. Each step is its own file: admission.ts (the job, the
// permit, the lease, the claim), transfer-call.ts (the call), outcome-record.ts (decide and record) and
// outcome-action.ts (what BullMQ does next).
import type { Job } from 'bullmq';
import { scrubError } from '../core/log.ts';
import type { TransferJob } from '../queue/job.ts';
import { admit, readTransferJob } from './admission.ts';
import { sendTransfer } from './transfer-call.ts';
import { recordOutcome } from './outcome-record.ts';
import { actOnOutcome } from './outcome-action.ts';
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
): Promise<ProcessResult> {
  const target = await readTransferJob(ctx, job, jobToken);
  const probe = await ctx.unreachable.awaitProbe(target.org);
  try {
    const admission = await admit(ctx, target);
    if (!('held' in admission)) return admission;
    const outcome = await sendTransfer(ctx, admission);
    const recorded = await recordOutcome(ctx, admission, outcome);
    return await actOnOutcome(ctx, admission, recorded);
  } finally {
    // The probe's answer is in (an answer deleted the state; a failure renewed the block): release it.
    probe?.release();
  }
}

export function createProcessor(deps: ProcessorDeps) {
  const ctx = processorContext(deps);
  // Whatever a job throws, BullMQ keeps (failedReason, stacktrace, events): only scrubbed errors leave.
  return async function processTransfer(job: Job<TransferJob>, jobToken?: string): Promise<ProcessResult> {
    try {
      return await processOne(ctx, job, jobToken);
    } catch (err) {
      throw scrubError(err, ctx.scrub);
    }
  };
}
