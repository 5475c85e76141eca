// The limits of one organization as stored in Redis and in force now (learned limits included), for
// `limits show` and the dashboard's controls alike; and one line per changed field of a change-log entry.
import type { ReadContext } from '../../app/read-context.ts';
import { tokensOf, type Config } from '../../core/config.ts';
import { formatDuration, formatRate, humanizeMs } from '../../core/duration.ts';
import { encodeBurst } from '../../core/burst.ts';
import { formatHaltAt } from '../../core/halt-rule.ts';
import { scheduleOf } from '../../limiter/run-window-open.ts';
import { describeRunWindow, openAt } from '../../limiter/run-window.ts';
import { envDifferences, type LimitPolicy } from '../../limiter/policy.ts';
import type { BudgetView, LearnedView, PauseInfo, ScopeView } from '../../limiter/types.ts';

export interface OrgLimits {
  org: string;
  /** Limits are stored in Redis (false: every process uses its own LIMIT_*). */
  stored: boolean;
  perOrg: string;
  perToken: string;
  reserve: number;
  reserveShare: string | null;
  /** What this tool may spend per org window: perOrg less the reserve. */
  usableOrgLimit: string;
  paused: PauseInfo | null;
  /**
   * The organization's limit learned from the service's 429s, in force now (learned plus the probe
   * steps since: acquire.lua "Learned limits"), like "40/2s"; null when none holds it below usableOrgLimit.
   */
  learned: string | null;
  learnedDetail: LearnedDetail | null;
  seededFrom: LimitPolicy['seededFrom'];
  /** The pacing burst in force ("10%", "10"; "100%": off) and where it comes from. */
  burst: { value: string; stored: boolean };
  /** How the organization's bucket paces, like "100 at once, then one every 1 min 26 s"; null: not paced. */
  orgPacing: string | null;
  /** The run window: its calendar and whether it is open now; null when none is set. */
  runWindow: RunWindowState | null;
  /** The error budget (docs/guard-rails.md): the share that halts ("50%" or "off"), the sample, and where from. */
  halt: { at: string; sample: number; stored: boolean };
  environment: { LIMIT_PER_TOKEN: string; LIMIT_PER_ORG: string; LIMIT_BURST: string };
  /**
   * Of this environment's LIMIT_* and HALT_*, those it sets: the values of the others are built-in defaults
   * nobody set, and are not called this environment's.
   */
  environmentSet: Array<'LIMIT_PER_TOKEN' | 'LIMIT_PER_ORG' | 'LIMIT_BURST' | 'HALT_AT' | 'HALT_SAMPLE'>;
  /** LIMIT_* of this environment that differ from Redis (workers follow Redis). */
  differsFromEnvironment: Array<{ variable: string; env: string; stored: string }>;
  tokens: Array<{
    tokenId: string;
    limit: string;
    override: boolean;
    paused: PauseInfo | null;
    /**
     * The limit learned from the service's 429s, in force now (it probes back up toward `limit`), like
     * "10/2s"; null when none holds the token below its configured limit.
     */
    learned: string | null;
    learnedDetail: LearnedDetail | null;
    /** The 429s the service answered on this token (every process together); null when none. */
    rateLimited: number | null;
    /** How its bucket paces, like "10 at once, then one every 36 s"; null: not paced. */
    pacing: string | null;
  }>;
}

/** A run window as shown: its calendar, whether it is open now, and "open until ..." / "opens ...". */
export interface RunWindowState {
  windows: string;
  tz: string;
  blackout: string;
  open: boolean;
  now: string;
}

/** "10 at once, then one every 36 s" for a paced scope; null when it is not paced. */
export function pacingOf(s: ScopeView): string | null {
  if (!s.pace) return null;
  const ms = s.pace.intervalMs;
  // Whole seconds first, then minutes and seconds: 119.67 s is "2 min", not "1 min 60 s".
  const whole = Math.round(ms / 1000);
  const sec = whole % 60;
  // "36 s", "1 min 26 s" (humanizeMs rounds to whole minutes), "2 h 24 min".
  const every =
    ms < 1000
      ? `${Math.round(ms)} ms`
      : whole < 60
        ? `${whole} s`
        : ms >= 3_600_000
          ? humanizeMs(ms)
          : `${Math.floor(whole / 60)} min${sec > 0 ? ` ${sec} s` : ''}`;
  return `${s.pace.burst} at once, then one every ${every}`;
}

/** The run window of a view at `nowMs`: its texts and "open until ..." / "opens ..."; null when none. */
export function runWindowOf(view: BudgetView, nowMs: number): RunWindowState | null {
  if (!view.runWindow) return null;
  let schedule;
  try {
    schedule = scheduleOf(view.runWindow);
  } catch (err) {
    // Stored by hand, or a time zone this host does not know: said, never a failed status.
    return {
      windows: view.runWindow.windows,
      tz: view.runWindow.tz,
      blackout: view.runWindow.blackout,
      open: false,
      now: `unreadable here (${(err as Error).message}): closed until it is set again`,
    };
  }
  if (!schedule) return null;
  const open = openAt(schedule, nowMs);
  return {
    windows: view.runWindow.windows || 'all all',
    tz: schedule.tz,
    blackout: view.runWindow.blackout,
    open: open !== null && open[0] <= nowMs,
    now: describeRunWindow(schedule, nowMs),
  };
}

/** How a learned limit stands: what the service accepted, when, and the next probe step. */
export interface LearnedDetail {
  /** The limit in force now. */
  limit: number;
  /** What was learned (the service had accepted this many in its window when it answered 429). */
  max: number;
  /** When it was learned (ISO). */
  at: string;
  /** When the next probe step raises it (ms from now). */
  nextProbeInMs: number;
}

function learnedOf(s: { limit: number; windowMs: number; learned?: LearnedView }): {
  learned: string | null;
  learnedDetail: LearnedDetail | null;
} {
  if (!s.learned) return { learned: null, learnedDetail: null };
  return {
    learned: formatRate({ max: s.limit, windowMs: s.windowMs }),
    learnedDetail: {
      limit: s.limit,
      max: s.learned.max,
      at: new Date(s.learned.at).toISOString(),
      nextProbeInMs: s.learned.nextProbeInMs,
    },
  };
}

export async function collectLimits(ctx: ReadContext, org: string): Promise<OrgLimits> {
  const config = ctx.config;
  const policy = await ctx.budget.policy(org);
  const ids = tokensOf(config as Config, org).map((t) => t.id);
  // Tokens with a limit of their own or a pause stored by another host's environment are shown too.
  for (const id of [...Object.keys(policy.tokens), ...Object.keys(policy.pausedTokens)]) {
    if (!ids.includes(id)) ids.push(id);
  }
  const view: BudgetView = await ctx.budget.peek(org, ids);
  const perOrg = policy.perOrg ?? config.limitPerOrg;
  return {
    org,
    stored: policy.stored,
    perOrg: formatRate(perOrg),
    perToken: formatRate(policy.perToken ?? config.limitPerToken),
    reserve: policy.reserve,
    reserveShare: policy.reserveShare === null ? null : `${policy.reserveShare}%`,
    usableOrgLimit: `${Math.max(0, perOrg.max - policy.reserve)}/${formatDuration(perOrg.windowMs)}`,
    paused: policy.paused,
    ...learnedOf(view.org),
    seededFrom: policy.seededFrom,
    burst: {
      value: encodeBurst(policy.burst ?? config.burst),
      stored: policy.burst !== null,
    },
    orgPacing: pacingOf(view.org),
    runWindow: runWindowOf(view, view.now),
    halt: {
      at: formatHaltAt(policy.haltAt ?? config.haltAt),
      sample: policy.haltSample ?? config.haltSample,
      stored: policy.haltAt !== null || policy.haltSample !== null,
    },
    environment: {
      LIMIT_PER_TOKEN: formatRate(config.limitPerToken),
      LIMIT_PER_ORG: formatRate(config.limitPerOrg),
      LIMIT_BURST: encodeBurst(config.burst),
    },
    // A config built without these lists (a caller's own) is taken as setting every variable.
    environmentSet: [
      ...(config.limitVariablesSet ?? (['LIMIT_PER_TOKEN', 'LIMIT_PER_ORG', 'LIMIT_BURST'] as const)),
      ...(config.haltVariablesSet ?? (['HALT_AT', 'HALT_SAMPLE'] as const)),
    ],
    differsFromEnvironment: envDifferences(policy, config),
    tokens: view.tokens.map((t) => ({
      tokenId: t.tokenId,
      // The configured limit; `learned` is the one in force when the service taught a lower one.
      limit: formatRate({ max: t.learned?.configured ?? t.limit, windowMs: t.windowMs }),
      override: t.override,
      paused: t.paused,
      ...learnedOf(t),
      rateLimited: t.rateLimited ?? null,
      pacing: pacingOf(t),
    })),
  };
}

type Variable = OrgLimits['environmentSet'][number];

/** "LIMIT_PER_ORG=60/4s", or "LIMIT_PER_ORG's built-in default 1000/1d" when nobody set it. */
function valueOf(variable: Variable, value: string, set: readonly Variable[]): string {
  return set.includes(variable) ? `${variable}=${value}` : `${variable}'s built-in default ${value}`;
}

/**
 * What stored limits were seeded (or last reset) from, in words that are true: values an environment set,
 * built-in defaults nobody set, or (a record of an earlier release) either.
 */
export function seededWords(s: NonNullable<OrgLimits['seededFrom']>): string {
  if (!s.set) {
    return (
      `seeded with ${s.LIMIT_PER_TOKEN} per token and ${s.LIMIT_PER_ORG} per organization, from LIMIT_* ` +
      `or their built-in defaults: an earlier release did not record which`
    );
  }
  if (s.set.length === 0) {
    return (
      `seeded from the built-in defaults, ${s.LIMIT_PER_TOKEN} per token and ${s.LIMIT_PER_ORG} per ` +
      `organization: no LIMIT_* was set`
    );
  }
  const token = valueOf('LIMIT_PER_TOKEN', s.LIMIT_PER_TOKEN, s.set);
  return `seeded from ${token} and ${valueOf('LIMIT_PER_ORG', s.LIMIT_PER_ORG, s.set)}`;
}

/** Where the limits shown come from: stored in Redis (seeded from what), or this process's own. */
export function limitsOrigin(l: OrgLimits): string {
  if (l.stored) return `limits in Redis${l.seededFrom ? ` (${seededWords(l.seededFrom)})` : ''}`;
  const set = l.environmentSet;
  const env = l.environment;
  return (
    `no limits stored in Redis: each process uses its own LIMIT_* (this one: ` +
    `${valueOf('LIMIT_PER_TOKEN', env.LIMIT_PER_TOKEN, set)}, ${valueOf('LIMIT_PER_ORG', env.LIMIT_PER_ORG, set)})`
  );
}

/** Where the burst shown comes from when none is stored: this process's LIMIT_BURST, or its built-in default. */
export function burstOrigin(l: OrgLimits): string {
  if (l.burst.stored) return '';
  return l.environmentSet.includes('LIMIT_BURST')
    ? ' (LIMIT_BURST of this process: none stored)'
    : ` (the built-in default: LIMIT_BURST is not set, none stored)`;
}

/** Where the error budget shown comes from when none is stored: HALT_* of this process, or built-in defaults. */
export function haltOrigin(l: OrgLimits): string {
  if (l.halt.stored) return '';
  const set = (['HALT_AT', 'HALT_SAMPLE'] as const).filter((v) => l.environmentSet.includes(v));
  if (set.length === 2) return ' (HALT_AT / HALT_SAMPLE of this process: none stored)';
  if (set.length === 0) return ' (the built-in defaults: HALT_AT and HALT_SAMPLE are not set, none stored)';
  const other = set[0] === 'HALT_AT' ? 'HALT_SAMPLE' : 'HALT_AT';
  return ` (${set[0]} of this process, ${other}'s built-in default: none stored)`;
}

/** One line per changed field: "perToken 20/2s -> 5/2s". */
export function describeChange(details: Record<string, unknown>): string {
  const before = (details.before ?? {}) as Record<string, unknown>;
  const after = (details.after ?? {}) as Record<string, unknown>;
  const show = (v: unknown) =>
    v === null || v === undefined
      ? '-'
      : typeof v === 'object'
        ? 'who' in (v as object)
          ? `by ${(v as PauseInfo).who}${(v as PauseInfo).reason ? ` (${(v as PauseInfo).reason})` : ''}`
          : JSON.stringify(v)
        : String(v);
  const parts: string[] = [];
  for (const k of new Set([...Object.keys(before), ...Object.keys(after)])) {
    if (JSON.stringify(before[k]) === JSON.stringify(after[k])) continue;
    if (k === 'tokens' || k === 'learned') {
      // Token limits of their own, one by one: "token 1a2b3c4d5e6f - -> 5/2s".
      const b = (before[k] ?? {}) as Record<string, string>;
      const a = (after[k] ?? {}) as Record<string, string>;
      for (const id of new Set([...Object.keys(b), ...Object.keys(a)])) {
        if (b[id] === a[id]) continue;
        const what =
          k === 'learned' ? `learned ${id === 'org' ? 'organization' : `token ${id}`}` : `token ${id}`;
        parts.push(`${what} ${show(b[id])} -> ${show(a[id])}`);
      }
      continue;
    }
    parts.push(`${k} ${show(before[k])} -> ${show(after[k])}`);
  }
  return parts.join(', ') || 'no change';
}
