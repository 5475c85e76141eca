// The overview: per organization and per run, plus the alerts. One snapshot of the fleet is filtered,
// ranked (org-states.ts) and paged; only the page's organizations get their hours read.
import type { AppContext } from '../../app/context.ts';
import { HOUR_MS, HOURS_KEPT, readHourlyMany, type HourBucket } from '../../outcomes/hourly.ts';
import { orgBurnDown, runBurnDown, runFinishOf, type BurnDown, type RunLeft } from '../eta/burn-down.ts';
import { heldClasses } from './held-classes.ts';
import { progressOf, type RunProgress } from '../../outcomes/run-progress.ts';
import type { WriteState } from '../../redis/writes.ts';
import { redisAlert, type Alert } from './alerts.ts';
import {
  classify,
  idleText,
  matchesState,
  ranked,
  summarize,
  summaryText,
  type Classified,
  type FleetSummary,
  type OrgState,
  type StateFilter,
} from './org-states.ts';
import { runOverviewsFrom, trimRun, type RunOverview } from './run-overview.ts';
import { collectStatus, readStatus, type OrgStatus, type Status } from './status.ts';

export { alertsOf, redisAlert, type Alert } from './alerts.ts';
export { runOverview, type RunOverview } from './run-overview.ts';

export interface OrgOverview extends OrgStatus {
  state: OrgState;
  progress: RunProgress;
  /** The hours of the last day that recorded an outcome, oldest first (empty hours are left out). */
  hourly: HourBucket[];
  /** Learners left over the hours kept, and the projected finish (burn-down.ts). */
  burnDown: BurnDown;
  /** Held learners by pre-flight class ('unknown', 'no-user'), when the organization has any. */
  held: Record<string, number> | null;
}

/** A run of the overview, with its burn-down (null when it spans more organizations than are read). */
export type RunCard = RunOverview & { burnDown: BurnDown | null };

export interface OverviewView {
  /** Part of the organization key (any case); '' for every organization. */
  q: string;
  state: StateFilter;
  /** 1-based. */
  page: number;
  perPage: number;
}

export const DEFAULT_VIEW: Readonly<OverviewView> = { q: '', state: 'attention', page: 1, perPage: 50 };
/** Alerts sent at most (the most urgent first); `alertsTotal` counts them all. */
export const ALERTS_SHOWN = 50;
/** Organizations per run in the overview (trimRun); /api/runs/:id has them all. */
export const RUN_ORGS_SHOWN = 10;

export interface Overview {
  at: string;
  limits: { perToken: string; perOrg: string };
  /** The view asked for (its page kept within the pages there are), how many match, how many pages. */
  view: OverviewView & { matched: number; pages: number };
  summary: FleetSummary & { text: string; idleText: string };
  /** The page's organizations, ranked. */
  orgs: OrgOverview[];
  runs: RunCard[];
  alerts: Alert[];
  alertsTotal: number;
  redis: WriteState | null;
}

export interface FleetOrg {
  org: string;
  status: OrgStatus;
  c: Classified;
}

/** Every organization's status and state (in LEARNER_API_TOKENS's order), the runs, and Redis. */
export interface FleetSnapshot {
  at: string;
  limits: Status['limits'];
  redis: WriteState | null;
  orgs: ReadonlyMap<string, FleetOrg>;
  runs: RunOverview[];
  /** Per organization, the runs read with their learners left there. */
  runLefts: ReadonlyMap<string, RunLeft[]>;
}

function entriesOf(status: Status): [string, FleetOrg][] {
  return status.orgs.map((s) => [s.org, { org: s.org, status: s, c: classify(s) }]);
}

export async function readFleet(ctx: AppContext, options: { runs?: number } = {}): Promise<FleetSnapshot> {
  const metas = await ctx.runs.list(options.runs ?? 10);
  // The runs' counters come with each organization's own reads: one call per organization in all.
  const { status, runCounts } = await readStatus(ctx, ctx.config.orgs, metas);
  const runs = runOverviewsFrom(metas, runCounts);
  const runLefts = new Map<string, RunLeft[]>();
  for (const r of runs) {
    for (const [org, v] of Object.entries(r.byOrg)) {
      const left = { id: r.id, createdAt: Date.parse(r.createdAt), left: v.progress.waiting };
      runLefts.set(org, [...(runLefts.get(org) ?? []), left]);
    }
  }
  return {
    at: status.at,
    limits: status.limits,
    redis: status.redis,
    orgs: new Map(entriesOf(status)),
    runs: runs.map((r) => trimRun(r, RUN_ORGS_SHOWN)),
    runLefts,
  };
}

/** The snapshot with these organizations (and Redis's state) read again; the rest and the runs kept. */
export async function refreshOrgs(
  ctx: AppContext,
  fleet: FleetSnapshot,
  orgs: readonly string[],
): Promise<FleetSnapshot> {
  const status = await collectStatus(ctx, orgs);
  const map = new Map(fleet.orgs);
  for (const [org, entry] of entriesOf(status)) map.set(org, entry);
  return { ...fleet, at: status.at, redis: status.redis, orgs: map };
}

/** The organizations of a view, ranked, and its page (kept within the pages there are). */
export function pageOf(
  fleet: FleetSnapshot,
  view: OverviewView,
): { items: FleetOrg[]; matched: number; pages: number; page: number } {
  const q = view.q.toLowerCase();
  const size = fleet.orgs.size;
  const matching = [...fleet.orgs.values()].filter(
    (e) => (q === '' || e.org.toLowerCase().includes(q)) && matchesState(view.state, e.c.state, size),
  );
  const pages = Math.max(1, Math.ceil(matching.length / view.perPage));
  const page = Math.min(Math.max(1, view.page), pages);
  const start = (page - 1) * view.perPage;
  return {
    items: ranked(matching).slice(start, start + view.perPage),
    matched: matching.length,
    pages,
    page,
  };
}

export async function overviewOf(
  ctx: AppContext,
  fleet: FleetSnapshot,
  view: OverviewView,
): Promise<Overview> {
  const { items, matched, pages, page } = pageOf(fleet, view);
  const now = Date.parse(fleet.at);
  // The hours of the page's organizations, and of the runs' organizations for their burn-down (a run of
  // more organizations than a run card shows has none: its hours would cost a read of every one).
  const charted = fleet.runs.filter((r) => r.orgCount <= RUN_ORGS_SHOWN);
  const hourOrgs = [...new Set([...items.map((e) => e.org), ...charted.flatMap((r) => r.orgs)])];
  const [read, held] = await Promise.all([
    readHourlyMany(ctx.redis, ctx.keys, hourOrgs, HOURS_KEPT, now),
    Promise.all(items.map((e) => heldClasses(ctx, e.org, e.status.learners.held ?? 0))),
  ]);
  const hoursOf = new Map(hourOrgs.map((org, i) => [org, read[i] ?? []]));
  const dayAgo = now - 24 * HOUR_MS;
  const orgs = items.map((e, i): OrgOverview => {
    const hours = hoursOf.get(e.org) ?? [];
    return {
      ...e.status,
      state: e.c.state,
      progress: progressOf(e.status.learners),
      hourly: hours.filter((h) => Date.parse(h.hour) > dayAgo - HOUR_MS),
      burnDown: orgBurnDown(hours, e.status.remaining, now, e.status.eta, fleet.runLefts.get(e.org) ?? []),
      held: held[i] ?? null,
    };
  });
  const runs = fleet.runs.map((r): RunCard => {
    if (r.orgCount > RUN_ORGS_SHOWN) return { ...r, burnDown: null };
    const parts = r.orgs.map((org) => ({
      left: r.byOrg[org]?.progress.waiting ?? 0,
      eta: fleet.orgs.get(org)?.status.eta,
    }));
    const finish = runFinishOf(
      parts.flatMap((p) => (p.eta ? [{ left: p.left, eta: p.eta }] : [])),
      now,
    );
    const hours = r.orgs.flatMap((org) => hoursOf.get(org) ?? []);
    const run = { id: r.id, createdAt: Date.parse(r.createdAt), left: r.progress.waiting };
    return { ...r, burnDown: runBurnDown(run, hours, now, finish) };
  });
  const all = [...fleet.orgs.values()];
  const alerts = [...redisAlert(fleet.redis), ...ranked(all).flatMap((e) => e.c.alerts)];
  const summary = summarize(all.map((e) => e.c));
  return {
    at: fleet.at,
    limits: fleet.limits,
    view: { ...view, page, matched, pages },
    summary: { ...summary, text: summaryText(summary), idleText: idleText(summary) },
    orgs,
    runs,
    alerts: alerts.slice(0, ALERTS_SHOWN),
    alertsTotal: alerts.length,
    redis: fleet.redis,
  };
}

export async function collectOverview(
  ctx: AppContext,
  view: OverviewView = DEFAULT_VIEW,
  options: { runs?: number } = {},
): Promise<Overview> {
  return overviewOf(ctx, await readFleet(ctx, options), view);
}
