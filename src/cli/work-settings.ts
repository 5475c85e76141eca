// ATTEMPTS and BACKOFF are fixed on each learner's job when it is enqueued (queue/queues.ts
// defaultJobOptions): `work` follows what each job carries. A person who sets them for `work` alone
// expects them to apply, and would never learn otherwise: work compares them with a few queued jobs and
// says so, once.
import type { AppContext } from '../app/context.ts';
import { formatDuration } from '../core/duration.ts';
import type { Env } from './io.ts';

/** Organizations whose first queued job is read (one job each: a sample, not a scan). */
const SAMPLED_ORGS = 5;

interface Carried {
  org: string;
  attempts: number | undefined;
  backoffMs: number | undefined;
}

/** What the first job waiting (or delayed) of an organization carries; undefined when none waits. */
async function carried(ctx: AppContext, org: string): Promise<Carried | undefined> {
  const [job] = await ctx.queues.get(org).getJobs(['waiting', 'prioritized', 'delayed'], 0, 0);
  if (!job) return undefined;
  const backoff = job.opts.backoff;
  const backoffMs = typeof backoff === 'number' ? backoff : backoff?.delay;
  return { org, attempts: job.opts.attempts, backoffMs };
}

/**
 * The warning for ATTEMPTS / BACKOFF set in work's environment to other values than the queued jobs
 * carry, or undefined. Read from a few organizations' first job.
 */
export async function jobSettingsWarning(
  ctx: AppContext,
  env: Env,
  orgs: readonly string[],
): Promise<string | undefined> {
  const setAttempts = Boolean(env.ATTEMPTS);
  const setBackoff = Boolean(env.BACKOFF);
  if (!setAttempts && !setBackoff) return undefined;
  const { attempts, backoffMs } = ctx.config;
  for (const org of orgs.slice(0, SAMPLED_ORGS)) {
    const c = await carried(ctx, org);
    if (!c) continue;
    const differ: string[] = [];
    const jobs: string[] = [];
    if (setAttempts && c.attempts !== undefined && c.attempts !== attempts) {
      differ.push(`ATTEMPTS=${attempts}`);
      jobs.push(`ATTEMPTS ${c.attempts}`);
    }
    if (setBackoff && c.backoffMs !== undefined && c.backoffMs !== backoffMs) {
      differ.push(`BACKOFF=${formatDuration(backoffMs)}`);
      jobs.push(`BACKOFF ${formatDuration(c.backoffMs)}`);
    }
    if (differ.length === 0) continue;
    return (
      `${differ.join(' and ')} of this work do not apply to the learners already queued: each job keeps ` +
      `the ATTEMPTS and BACKOFF of the command that enqueued it (the jobs of ${org} carry ${jobs.join(' and ')}). ` +
      `Set them where learners are enqueued (enqueue, crawl, reconcile, retry); this work applies its own ` +
      `only to the jobs it makes again (repair)`
    );
  }
  return undefined;
}
