// When one organization's remaining work will be done: the limiter simulated forward from Redis
// (docs/eta.md). `plan`, `status` and the dashboard all call etaOf, so they agree.
import { formatDuration, humanizeMs, type Rate } from '../../core/duration.ts';
import type { BudgetView, TokenView } from '../../limiter/types.ts';
import {
  simulate,
  type Frees,
  type PacedScope,
  type SimInput,
  type SimScope,
} from '../../limiter/simulate/index.ts';
import { limitedByText, scopeOf, sharedWindows } from '../../limiter/simulate/rules.ts';
import { openLookup } from '../../limiter/run-window-open.ts';
import type { EtaBound } from '../../limiter/kinds.ts';
import { describeRunWindow, openAt, type RunSchedule } from '../../limiter/run-window.ts';

export interface Eta {
  /** Ms from now until the finish (Infinity: never, or paused). */
  ms: number;
  /** What holds the work back ('none': it fits the budget left now). */
  boundBy: EtaBound;
  /** Permits usable now (the smaller of the organization's and its tokens' room). */
  availableNow: number;
  text: string;
  /**
   * The finish, ms since the epoch (Redis's clock); null when there is nothing to wait for or no
   * finish. Null, not "now", so an idle ETA stays the same between reads (the live overview sends
   * only what changed).
   */
  finishAt: number | null;
  /** The finish as "2026-12-14 09:00 UTC"; null as finishAt. */
  finishUtc: string | null;
  /** "the organization's budget, 1000/1d" or "the tokens' budgets, 100/1h each"; '' for 'none'. */
  limitedBy: string;
  /** limitedBy under the previous release's name, for its JSON readers. */
  heldBy: string;
  /** Organization windows the work spans, the current one included (0: nothing left). */
  windows: number;
  /** Usable tokens the finish was computed for. */
  tokens: number;
  /** Paused: no finish until a resume (ms then says how long after it). */
  paused: boolean;
  /** `text` less the finish, which the overview's card says on its own line. */
  note?: string;
}

/** "2026-12-14 09:00 UTC", to the nearest minute (to the second when `seconds`). */
export function formatUtc(ms: number, seconds = false): string {
  const unit = seconds ? 1000 : 60_000;
  const iso = new Date(Math.round(ms / unit) * unit).toISOString();
  return `${iso.slice(0, 10)} ${iso.slice(11, seconds ? 19 : 16)} UTC`;
}

/** A token's configured rate (a learned limit is what the service allowed lately, not a rate). */
function rateOf(t: TokenView): Rate {
  return { max: t.learned?.configured ?? t.limit, windowMs: t.windowMs };
}

function tokenScopes(view: BudgetView, count: number | undefined): { scopes: SimScope[]; rates: Rate[] } {
  const all = view.tokens.map((t, i) => ({
    scope: scopeOf(t, view.frees?.tokens[i]),
    rate: { max: t.limit, windowMs: t.windowMs },
    configured: rateOf(t),
  }));
  const usable = all.filter((t) => t.scope.blockedMs !== Infinity);
  if (count === undefined) return { scopes: usable.map((t) => t.scope), rates: usable.map((t) => t.rate) };
  // What-if: the first `count` usable tokens as they are, then fresh ones at the configured rate.
  const fresh = (all[0]?.configured ?? { max: 0, windowMs: view.org.windowMs }) as Rate;
  const chosen = usable.slice(0, count);
  while (chosen.length < count) {
    // Paced as the tokens the limiter has (the same burst), from a full bucket.
    const pace = all[0]?.scope.pace;
    chosen.push({
      scope: {
        limit: fresh.max,
        windowMs: fresh.windowMs,
        frees: [],
        blockedMs: 0,
        ...(pace ? { pace: { ...pace, tatMs: 0 } } : {}),
      },
      rate: fresh,
      configured: fresh,
    });
  }
  return { scopes: chosen.map((t) => t.scope), rates: chosen.map((t) => t.rate) };
}

const DAY_MS = 86_400_000;

/**
 * The run window for the simulation: the open interval at or after t (ms from the peek), from the
 * instants acquire.lua reads, then the calendar (run-window-open.ts openLookup).
 */
function openOf(
  view: BudgetView,
): Pick<SimInput, 'open' | 'openPeriodMs' | 'openPeriodFromMs'> & { schedule?: RunSchedule } {
  let lookup: ReturnType<typeof openLookup> = null;
  try {
    lookup = view.runWindow ? openLookup(view.runWindow) : null;
  } catch {
    // A calendar this host cannot read keeps the organization closed, as refreshOpen does.
    return { open: () => null };
  }
  if (!lookup) return {};
  const { schedule, horizon, at: openAtAbs } = lookup;
  // After the last blackout and the stored instants the calendar repeats weekly; across a clock
  // change that is up to an hour off (docs/eta.md).
  const lastBlackout = Math.max(
    ...schedule.blackouts.map((b) => Date.parse(`${b.to}T00:00:00Z`) + 2 * DAY_MS),
  );
  const from = Math.max(0, lastBlackout - view.now, Number.isFinite(horizon) ? horizon - view.now : 0);
  return {
    schedule,
    open: (t: number) => {
      const at = openAtAbs(view.now + t);
      return at ? [at[0] - view.now, at[1] - view.now] : null;
    },
    openPeriodMs: 7 * DAY_MS,
    openPeriodFromMs: from,
  };
}

/**
 * "opens Mon 18:00 Europe/Berlin" from the calendar, or "opens 2026-12-14 18:00:05 UTC" when the
 * stored instants disagree with it (written by hand, or the calendar changed since).
 */
function opensText(schedule: RunSchedule, now: number, opensAt: number): string {
  const calendar = openAt(schedule, now);
  return calendar && calendar[0] === opensAt
    ? describeRunWindow(schedule, now)
    : `opens ${formatUtc(opensAt, true)}`;
}

function never(
  text: string,
  availableNow: number,
  tokens: number,
  paused = false,
  boundBy: Eta['boundBy'] = 'org',
): Eta {
  return {
    ms: Infinity,
    boundBy,
    availableNow,
    text,
    finishAt: null,
    finishUtc: null,
    limitedBy: '',
    heldBy: '',
    windows: Infinity,
    tokens,
    paused,
  };
}

/** Closed now: said first, with when it opens (as status says it); '' when open. */
function waitingText(view: BudgetView, schedule: RunSchedule | undefined, open: SimInput['open']): string {
  const first = open?.(0);
  return schedule && first && first[0] > 0
    ? `waiting for the run window (${opensText(schedule, view.now, view.now + first[0])}); `
    : '';
}

/** The ETA of an organization with nothing left to move. */
function nothingLeft(availableNow: number, tokens: number, paused: boolean): Eta {
  return {
    availableNow,
    tokens,
    ms: 0,
    boundBy: 'none',
    text: 'nothing left',
    finishAt: null,
    finishUtc: null,
    limitedBy: '',
    heldBy: '',
    windows: 0,
    paused,
  };
}

/**
 * The finish of `remaining` learners for `view`'s organization (a peek, with frees for an exact
 * start). `tokens`: as if it had that many usable tokens (plan --tokens).
 */
export function etaOf(view: BudgetView, remaining: number, options: { tokens?: number } = {}): Eta {
  const { scopes, rates } = tokenScopes(view, options.tokens);
  const orgScope = scopeOf(view.org, view.frees?.org);
  // Paused, the organization is simulated as it will be at its resume.
  const org: PacedScope = view.org.paused ? { ...orgScope, blockedMs: 0 } : orgScope;
  const shared = sharedWindows(view);
  const room = (s: SimScope) => (s.blockedMs > 0 ? 0 : Math.max(0, s.limit - framesCount(s.frees)));
  const paused = view.org.paused !== null;
  const availableNow = paused
    ? 0
    : Math.min(
        room(org),
        ...shared.map(room),
        scopes.reduce((a, s) => a + room(s), 0),
      );
  const base = { availableNow, tokens: scopes.length };
  if (remaining <= 0) return nothingLeft(availableNow, scopes.length, paused);
  if (org.limit <= 0)
    return never('never at these limits: the reserve leaves this tool nothing', 0, scopes.length);
  if (scopes.length === 0)
    return never('never: no usable token (each is paused or refused with 401)', 0, 0, paused, 'token');
  if (org.blockedMs === Infinity)
    return never('never: the organization is blocked until unblocked', 0, scopes.length);
  const { schedule, ...window } = openOf(view);
  const sim = simulate({ remaining, org, shared, tokens: scopes, ...window });
  if (sim.finishMs === Infinity) return never('never at these limits', availableNow, scopes.length, paused);
  const limitedBy = limitedByText(sim.boundBy, view, { rates, schedule });
  const windows = 1 + Math.floor(sim.finishMs / view.org.windowMs);
  const span = `${windows} window${windows === 1 ? '' : 's'} of ${formatDuration(view.org.windowMs)}`;
  if (paused) {
    return {
      ...never(
        `paused: no finish until it is resumed (then ${humanizeMs(sim.finishMs)} at these limits)`,
        0,
        scopes.length,
        true,
      ),
      ms: sim.finishMs,
      boundBy: sim.boundBy,
      limitedBy,
      heldBy: limitedBy,
      windows,
    };
  }
  const finishAt = sim.boundBy === 'none' ? null : view.now + sim.finishMs;
  const finishUtc = finishAt === null ? null : formatUtc(finishAt, sim.finishMs < 3_600_000);
  const waiting = waitingText(view, schedule, window.open);
  const text =
    sim.boundBy === 'none'
      ? `done now, within the budget left (${availableNow} left)`
      : `${waiting}done by ${finishUtc}, in ${humanizeMs(sim.finishMs)} (${span}); limited by ${limitedBy}`;
  return {
    ...base,
    ms: sim.finishMs,
    boundBy: sim.boundBy,
    text,
    note:
      sim.boundBy === 'none'
        ? `within the budget left (${availableNow} left)`
        : `${waiting}${span}; limited by ${limitedBy}`,
    finishAt,
    finishUtc,
    limitedBy,
    heldBy: limitedBy,
    windows,
    paused,
  };
}

function framesCount(frees: Frees): number {
  return frees.reduce((a, [, n]) => a + n, 0);
}
