// What the live feed collects for the overview: each tick re-reads the organizations on the
// watched pages, the whole fleet every `fleetEveryMs` (docs/dashboard-api.md). No "what changed"
// key is asked first: it would sit outside the organizations' slots (decision 11). Listeners get
// only the organizations that changed since their last frame.
import type { AppContext } from '../app/context.ts';
import {
  DEFAULT_VIEW,
  overviewOf,
  pageOf,
  readFleet,
  refreshOrgs,
  type FleetSnapshot,
  type OrgOverview,
  type Overview,
} from '../ops/views/overview.ts';
import type { LiveCollector } from './live.ts';
import type { BurnDown } from '../ops/eta/burn-down.ts';
import { burnDownSvg } from './views/burn-down.ts';
import { viewOfKey } from './routes/overview-query.ts';

/** The live frame: the overview, whole (`full`) or with only the organizations that changed. */
export type LiveFrame = Omit<Overview, 'runs'> & {
  full: boolean;
  /** The page's organizations in order: the browser compares it with the cards it shows. */
  pageOrgs: string[];
  /** Left out when no run changed since the listener's last frame. */
  runs?: Overview['runs'];
  /** The burn-down charts sent ('org:KEY', 'run:ID'), drawn on the server. */
  charts: Record<string, string>;
};

/** A burn-down as compared between ticks: its values, not where the clock moved its end. */
function burnPrint(b: BurnDown | null): unknown {
  return b && { left: b.left, finishAt: b.finishAt, text: b.finishText, ys: b.points.map((p) => p[1]) };
}

function chartsOf(orgs: Overview['orgs'], runs: Overview['runs'] | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const o of orgs) out[`org:${o.org}`] = burnDownSvg(o.burnDown, `organization ${o.org}`).value;
  for (const r of runs ?? [])
    if (r.burnDown) out[`run:${r.id}`] = burnDownSvg(r.burnDown, `run ${r.id}`).value;
  return out;
}

function runsPrint(runs: Overview['runs']): string {
  return JSON.stringify(runs.map((r) => ({ ...r, burnDown: burnPrint(r.burnDown) })));
}

/** An organization as compared between ticks: the limiter's clock moves on regardless. */
function fingerprint(o: OrgOverview): string {
  const { now: _now, ...budget } = o.budget;
  return JSON.stringify({ ...o, budget, burnDown: burnPrint(o.burnDown) });
}

export class OverviewLive implements LiveCollector<Overview> {
  readonly #ctx: AppContext;
  readonly #fleetEveryMs: number;
  #fleet: { snapshot: FleetSnapshot; at: number } | undefined;

  constructor(ctx: AppContext, fleetEveryMs: number) {
    this.#ctx = ctx;
    this.#fleetEveryMs = fleetEveryMs;
  }

  async collect(keys: readonly string[]): Promise<ReadonlyMap<string, Overview>> {
    const views = keys.map((key) => [key, viewOfKey(key)] as const);
    const last = this.#fleet;
    let snapshot: FleetSnapshot;
    if (
      !last ||
      Date.now() - last.at >= this.#fleetEveryMs ||
      last.snapshot.orgs.size <= DEFAULT_VIEW.perPage
    ) {
      const at = Date.now();
      snapshot = await readFleet(this.#ctx);
      this.#fleet = { snapshot, at };
    } else {
      const shown = new Set<string>();
      for (const [, view] of views) for (const e of pageOf(last.snapshot, view).items) shown.add(e.org);
      snapshot = await refreshOrgs(this.#ctx, last.snapshot, [...shown]);
      this.#fleet = { snapshot, at: last.at };
    }
    const out = new Map<string, Overview>();
    await Promise.all(
      views.map(async ([key, view]) => out.set(key, await overviewOf(this.#ctx, snapshot, view))),
    );
    return out;
  }

  full(o: Overview): LiveFrame {
    // Every chart of the view: later frames carry only what changed since this one, so a chart that
    // changed after the page was drawn, or while a dropped stream was down, comes now or never.
    return { ...o, full: true, pageOrgs: o.orgs.map((x) => x.org), charts: chartsOf(o.orgs, o.runs) };
  }

  diff(previous: Overview, next: Overview): LiveFrame {
    const before = new Map(previous.orgs.map((o) => [o.org, fingerprint(o)]));
    const { runs, ...rest } = next;
    const orgs = next.orgs.filter((o) => before.get(o.org) !== fingerprint(o));
    const runsChanged = runsPrint(previous.runs) !== runsPrint(runs);
    return {
      ...rest,
      full: false,
      pageOrgs: next.orgs.map((o) => o.org),
      orgs,
      ...(runsChanged ? { runs } : {}),
      charts: chartsOf(orgs, runsChanged ? runs : undefined),
    };
  }
}
