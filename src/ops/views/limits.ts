// One organization's limits, stored and in force (learned ones too), for `limits show` and the
// dashboard's controls; and the lines of a change-log entry.
import type { ReadContext } from '../../app/read-context.ts';
import { tokensOf, type Config } from '../../core/config.ts';
import { formatRate } from '../../core/duration.ts';
import { encodeBurst } from '../../core/burst.ts';
import { pacingOf, shownKinds, type KindsShown } from '../../limiter/kinds.ts';
import { envDifferences, type LimitPolicy } from '../../limiter/policy.ts';
import type { BudgetView, LearnedView, PauseInfo } from '../../limiter/types.ts';

// Read here by the status, the notifications and the dashboard: said once, in the limiter.
export { pacingOf };
export { runWindowOf, type RunWindowState } from '../../limiter/run-window.ts';

/** One organization's limits: each kind's values in force (KindsShown), and the rest. */
export interface OrgLimits extends KindsShown {
  org: string;
  /** Limits are stored in Redis (false: every process uses its own LIMIT_*). */
  stored: boolean;
  paused: PauseInfo | null;
  /** The limit learned from 429s, with probe steps since (acquire.lua "Learned limits"); or null. */
  learned: string | null;
  learnedDetail: LearnedDetail | null;
  seededFrom: LimitPolicy['seededFrom'];
  environment: { LIMIT_PER_TOKEN: string; LIMIT_PER_ORG: string; LIMIT_BURST: string };
  /** The LIMIT_* and HALT_* this environment sets (the others are built-in defaults). */
  environmentSet: Array<
    NonNullable<Config['limitVariablesSet']>[number] | NonNullable<Config['haltVariablesSet']>[number]
  >;
  /** LIMIT_* of this environment that differ from Redis (workers follow Redis). */
  differsFromEnvironment: Array<{ variable: string; env: string; stored: string }>;
  tokens: Array<{
    tokenId: string;
    limit: string;
    override: boolean;
    paused: PauseInfo | null;
    /** The limit learned from 429s, probing back up toward `limit`; or null. */
    learned: string | null;
    learnedDetail: LearnedDetail | null;
    /** The 429s the service answered on this token, all processes; null when none. */
    rateLimited: number | null;
    /** How its bucket paces, like "10 at once, then one every 36 s"; null: not paced. */
    pacing: string | null;
  }>;
}

/** How a learned limit stands: what the service accepted, when, and the next probe step. */
export interface LearnedDetail {
  /** The limit in force now. */
  limit: number;
  /** What was learned: how many the service had accepted in its window at the 429. */
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
  return {
    org,
    stored: policy.stored,
    ...shownKinds({ policy, config, peek: view }),
    paused: policy.paused,
    ...learnedOf(view.org),
    seededFrom: policy.seededFrom,
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

/** What stored limits were seeded or reset from: set values, defaults, or (older) either. */
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
