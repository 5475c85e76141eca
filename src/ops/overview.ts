// The overview: per organization (learners, jobs, budget, ETA, outcomes per hour) and per run
// (progress per organization), plus the alerts a person must act on (a token refused with 401, an
// organization or token paused with `pause` or the Controls page, a Redis that does not take writes or
// is above its memory high-water mark).
import type { AppContext } from '../app/context.ts';
import { readHourly, type HourBucket } from '../outcomes/hourly.ts';
import type { RunMeta } from '../outcomes/runs.ts';
import { collectStatus, type OrgStatus } from './status.ts';
import type { WriteState } from '../redis/writes.ts';
import type { RunCounts } from '../outcomes/store.ts';
import { progressOf, type RunProgress } from '../outcomes/run-progress.ts';

export interface Alert {
  level: 'error' | 'warning';
  /** null for an alert about the whole tool (Redis). */
  org: string | null;
  tokenId: string | null;
  message: string;
}

export interface OrgOverview extends OrgStatus {
  progress: RunProgress;
  hourly: HourBucket[];
}

export interface RunOverview extends RunMeta {
  progress: RunProgress;
  counts: RunCounts;
  byOrg: Record<string, { progress: RunProgress; counts: RunCounts }>;
}

export interface Overview {
  at: string;
  limits: { perToken: string; perOrg: string };
  orgs: OrgOverview[];
  runs: RunOverview[];
  alerts: Alert[];
  redis: WriteState | null;
}

/** The banner for a Redis that does not take writes (or is above the high-water mark), first of all. */
export function redisAlert(redis: WriteState | null): Alert[] {
  if (!redis || redis.writable) return [];
  return [{ level: 'error', org: null, tokenId: null, message: redis.message }];
}

export function alertsOf(orgs: readonly OrgStatus[]): Alert[] {
  const alerts: Alert[] = [];
  for (const o of orgs) {
    // Paused by a person (`learner-transfer pause` or the controls page): no new transfer until resume.
    const paused = o.budget.org.paused;
    if (paused) {
      alerts.push({
        level: 'warning',
        org: o.org,
        tokenId: null,
        message: `organization ${o.org} is paused by ${paused.who} since ${paused.at}: no new transfer is sent until it is resumed (Controls page, or 'learner-transfer resume --org ${o.org}')`,
      });
    }
    for (const t of o.budget.tokens) {
      if (!t.paused) continue;
      alerts.push({
        level: 'warning',
        org: o.org,
        tokenId: t.tokenId,
        message: `token ${t.tokenId} of ${o.org} is paused by ${t.paused.who} since ${t.paused.at} (Controls page, or 'learner-transfer resume --org ${o.org} --token ${t.tokenId}')`,
      });
    }
    for (const t of o.budget.tokens) {
      if (!t.blocked) continue;
      if (t.blocked.reason === '401') {
        alerts.push({
          level: 'error',
          org: o.org,
          tokenId: t.tokenId,
          message: `token ${t.tokenId} of ${o.org} is paused: the service refused it (401). Fix LEARNER_API_TOKENS, then run 'learner-transfer tokens unpause --org ${o.org}'.`,
        });
      } else {
        const left =
          t.blocked.remainingMs === null
            ? 'until unblocked'
            : `${Math.ceil(t.blocked.remainingMs / 1000)} s left`;
        alerts.push({
          level: 'warning',
          org: o.org,
          tokenId: t.tokenId,
          message: `token ${t.tokenId} of ${o.org} is blocked (${t.blocked.reason}), ${left}`,
        });
      }
    }
    if (o.budget.org.blocked) {
      alerts.push({
        level: 'warning',
        org: o.org,
        tokenId: null,
        message: `organization ${o.org} is blocked (${o.budget.org.blocked.reason})`,
      });
    }
  }
  return alerts;
}

export async function runOverview(ctx: AppContext, run: RunMeta): Promise<RunOverview> {
  const { total, byOrg } = await ctx.runs.counts(ctx.store, run);
  const per: RunOverview['byOrg'] = {};
  for (const [org, counts] of Object.entries(byOrg)) per[org] = { progress: progressOf(counts), counts };
  return { ...run, progress: progressOf(total), counts: total, byOrg: per };
}

export async function collectOverview(ctx: AppContext, options: { runs?: number } = {}): Promise<Overview> {
  const status = await collectStatus(ctx);
  const orgs = await Promise.all(
    status.orgs.map(async (o) => ({
      ...o,
      progress: progressOf(o.learners),
      hourly: await readHourly(ctx.redis, ctx.keys, o.org),
    })),
  );
  const metas = await ctx.runs.list(options.runs ?? 10);
  const runs = await Promise.all(metas.map((m) => runOverview(ctx, m)));
  return {
    at: status.at,
    limits: status.limits,
    orgs,
    runs,
    alerts: [...redisAlert(status.redis), ...alertsOf(status.orgs)],
    redis: status.redis,
  };
}
