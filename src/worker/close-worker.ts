// Closing a queue worker without hanging on a stuck connection.
import type { Worker } from 'bullmq';
import type { AppContext } from '../app/context.ts';

/**
 * close() waits for the jobs in flight to finish (their requests are bounded by the timeout). After a
 * Redis Cluster failover, BullMQ's close can wait for ever for its blocking connection to end (seen in
 * bench/ha.ts): past the request timeout and a margin, no job of ours is still running, so the stop goes
 * on (what a job had in hand is recorded or in the spool).
 */
export async function closeWorker(ctx: AppContext, w: Worker): Promise<void> {
  const closeMs = ctx.config.requestTimeoutMs + 5_000;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), closeMs)));
  const closed = await Promise.race([w.close().then(() => 'closed' as const), late]);
  clearTimeout(timer);
  if (closed === 'late') {
    ctx.logger.warn(
      { worker: w.name, waitedMs: closeMs },
      'a queue worker did not close in time (its Redis connection is stuck): stopping without it',
    );
    void w.close(true).catch(() => {});
  }
}
