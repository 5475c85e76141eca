// The limits the ETA simulates, one rule per bound of ETA_BOUNDS: what the simulation reads of a
// peek for it, and its words when it is what limits the work. ops/eta/eta.ts reads the list; a new
// limit the ETA must respect is a rule here (docs/architecture.md, "Adding a limit kind").
import { formatRate, type Rate } from '../../core/duration.ts';
import type { RunSchedule } from '../run-window.ts';
import type { BudgetView, ScopeView } from '../types.ts';
import type { Frees, PacedScope, SharedScope, SimBound } from './input.ts';
import { ETA_BOUNDS } from '../kinds.ts';

/** What the ETA worked out beside the peek, for a rule's words. */
export interface BoundContext {
  /** The rates of the usable tokens the finish was computed for (what-if tokens included). */
  rates: readonly Rate[];
  /** The run window's calendar, when one is set and readable. */
  schedule?: RunSchedule | undefined;
}

/** A limit the ETA simulates (the waits for it are booked to its bound). */
export interface SimRule {
  /**
   * A window every grant counts in beside the organization's (SimInput.shared), read from the
   * peek; null when none holds now. The organization's own window, the tokens' and the run
   * window are the simulation's fixed input (ops/eta/eta.ts).
   */
  window?(view: BudgetView): PacedScope | null;
  /** Its words as what limits the work: "the organization's budget, 1000/1d". */
  limitedBy(view: BudgetView, context: BoundContext): string;
}

/** The permits counted now by when they leave (without peek's frees: all at a window's end). */
function framesOf(scope: ScopeView, frees: Frees | undefined): Frees {
  if (frees) return frees;
  const counted = scope.used + scope.inflight;
  return counted > 0 ? [[scope.windowMs + 1, counted]] : [];
}

/** Until the scope is usable: 0, a 429 block's ms, or Infinity (paused, blocked until unblock). */
function blockedMs(scope: ScopeView): number {
  if (scope.paused) return Infinity;
  if (!scope.blocked) return 0;
  return scope.blocked.remainingMs ?? Infinity;
}

/** A scope of a peek as the simulation takes it: its window, its block and its bucket. */
export function scopeOf(scope: ScopeView, frees: Frees | undefined): PacedScope {
  return {
    limit: Math.max(0, scope.limit),
    windowMs: scope.windowMs,
    frees: framesOf(scope, frees),
    blockedMs: blockedMs(scope),
    // The scope's bucket (acquire.lua "Pacing"); nothing when it does not pace.
    ...(scope.pace
      ? { pace: { burst: scope.pace.burst, intervalMs: scope.pace.intervalMs, tatMs: scope.pace.tatInMs } }
      : {}),
  };
}

function tokensLimitText(rates: readonly Rate[]): string {
  const names = [...new Set(rates.map(formatRate))];
  if (rates.length === 1) return `the token's budget, ${names[0]}`;
  if (names.length === 1) return `the tokens' budgets, ${names[0]} each`;
  return `the tokens' budgets, ${names.join(' and ')}`;
}

/** The rules, one per bound: a bound without a rule does not compile. */
export const SIM_RULES: Readonly<Record<SimBound, SimRule>> = {
  org: {
    limitedBy: (view) => {
      const rate = formatRate({ max: Math.max(0, view.org.limit), windowMs: view.org.windowMs });
      const notes = [
        view.reserve > 0 ? `after a reserve of ${view.reserve}` : '',
        view.org.learned ? 'learned from 429s' : '',
      ].filter(Boolean);
      return `the organization's budget, ${rate}${notes.length ? ` (${notes.join(', ')})` : ''}`;
    },
  },
  token: { limitedBy: (_view, { rates }) => tokensLimitText(rates) },
  pace: {
    limitedBy: (view) => {
      const burst = view.org.pace?.burst ?? view.tokens.find((t) => t.pace)?.pace?.burst;
      return `pacing, a burst of ${burst ?? '-'} then one permit at a time (limits set --burst)`;
    },
  },
  'run-window': {
    limitedBy: (view, { schedule }) =>
      view.runWindow
        ? `the run window, ${view.runWindow.windows || 'all all'} (${schedule?.tz ?? 'UTC'})`
        : '',
  },
};

/** The windows the rules add beside the organization's, in ETA_BOUNDS's order. */
export function sharedWindows(view: BudgetView): SharedScope[] {
  return ETA_BOUNDS.flatMap((bound) => {
    const window = SIM_RULES[bound].window?.(view);
    return window ? [{ ...window, bound }] : [];
  });
}

/** What limits the work, in words ('' for 'none'). */
export function limitedByText(bound: SimBound | 'none', view: BudgetView, context: BoundContext): string {
  return bound === 'none' ? '' : SIM_RULES[bound].limitedBy(view, context);
}
