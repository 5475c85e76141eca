// What a transfer job carries: the organization key and the learner, where it came from, its run.
// Never a token: the worker picks a token of the organization from its own environment.
import * as z from 'zod';

export const transferJobSchema = z.object({
  org: z.string(),
  learnerId: z.number().int().positive(),
  runId: z.string(),
  /** "jobs.csv:12", "checked:jobs.csv:12" (plan --check --apply), "crawl:page 7", "reconcile:desired.csv:4", "retry" */
  source: z.string(),
  /**
   * 1: one of its run's canary learners, whose final outcome may end the canary (auto-approval).
   */
  canary: z.literal(1).optional(),
});

/** The sources whose learners the service's list showed. */
const LISTED_SOURCE = /^(checked|crawl|reconcile):/;

/**
 * Whether the list showed this job's learner when it was enqueued: a 404 for it then means the calls are
 * wrong (a token, a base address), not that the id is stale (the error budget counts it as a failure).
 */
export function shownByList(source: string): boolean {
  return LISTED_SOURCE.test(source);
}

/** The source of a learner `plan --check --apply` sends: its CSV line, marked checked. */
export function checkedSource(source: string): string {
  return `checked:${source}`;
}
export type TransferJob = z.infer<typeof transferJobSchema>;

/**
 * One job per (organization, learner): the queue is the organization's, so the learner id alone makes the
 * id unique. BullMQ refuses integer ids and ids with ':'; adding an id that exists is a no-op.
 */
export function jobIdOf(learnerId: number): string {
  return `l${learnerId}`;
}

export const JOB_NAME = 'transfer';
