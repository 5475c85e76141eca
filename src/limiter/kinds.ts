// Every kind of limit and every refusal scope of the budget, named once: each kind's policy
// fields, `limits set` flags, what `limits reset` does with it, and its words for the displays.
// A new kind starts here (docs/architecture.md, "Adding a limit kind").
import type { Config } from '../core/config.ts';
import { LearnerTransferError } from '../core/errors.ts';
import { burstMessage, decodeBurst, encodeBurst, parseBurst, type Burst } from '../core/burst.ts';
import {
  formatDuration,
  formatRate,
  humanizeMs,
  rateInBounds,
  rateMessage,
  readRate,
  type Rate,
} from '../core/duration.ts';
import {
  formatHaltAt,
  HALT_AT_EXPECTED,
  HALT_SAMPLE_EXPECTED,
  parseHaltAt,
  parseHaltSample,
  type HaltAt,
} from '../core/halt-rule.ts';
import {
  checkTimeZone,
  formatBlackouts,
  formatRunWindow,
  parseBlackouts,
  parseRunWindow,
  runWindowOf,
  type RunWindowState,
  type RunWindowTexts,
} from './run-window.ts';

/**
 * What a refusal of acquire names: the scope with the longest wait. `lasts`: it holds until
 * someone acts or a block ends; `eta`: the ETA's simulation (limiter/simulate/) waits for it.
 */
export const REFUSAL_SCOPES = {
  token: { what: "every usable token's window is full", lasts: false, eta: true },
  org: { what: "the organization's window is full (its reserve kept)", lasts: false, eta: true },
  pace: {
    what: 'a pacing bucket allows the next permit later (acquire.lua "Pacing")',
    lasts: false,
    eta: true,
  },
  'run-window': { what: 'the run window is closed', lasts: false, eta: true },
  'blocked-token': {
    what: 'every token is blocked (a 429 Retry-After, or a 401 until unblock)',
    lasts: true,
    eta: false,
  },
  'blocked-org': {
    what: 'the organization is blocked (a 429 Retry-After, or until unblock)',
    lasts: true,
    eta: false,
  },
  'no-token': { what: 'the organization has no usable token', lasts: true, eta: false },
  paused: {
    what: 'the organization, or every usable token of it, is paused until a resume',
    lasts: true,
    eta: false,
  },
  lease: { what: "another attempt holds the learner's lease", lasts: false, eta: false },
  'lost-lock': {
    what: "the job's BullMQ lock is no longer this worker's (do not send)",
    lasts: false,
    eta: false,
  },
  probe: {
    what: 'a 5xx storm, and another call is its one probe (acquire.lua "Probe")',
    lasts: false,
    eta: false,
  },
} as const satisfies Record<string, { what: string; lasts: boolean; eta: boolean }>;

export type RefusalScope = keyof typeof REFUSAL_SCOPES;

/** Every refusal scope, in the order above. */
export const REFUSAL_SCOPE_NAMES = Object.keys(REFUSAL_SCOPES) as RefusalScope[];

/** The scopes that hold an organization until someone acts or a block ends. */
export const LASTING_SCOPES: readonly RefusalScope[] = REFUSAL_SCOPE_NAMES.filter(
  (s) => REFUSAL_SCOPES[s].lasts,
);

type EtaScope = {
  [S in RefusalScope]: (typeof REFUSAL_SCOPES)[S]['eta'] extends true ? S : never;
}[RefusalScope];

/** What held the ETA back, in tie-break order, or 'none' (it fits the budget left now). */
export const ETA_BOUNDS = ['org', 'token', 'pace', 'run-window'] as const satisfies readonly EtaScope[];
export type EtaBound = (typeof ETA_BOUNDS)[number] | 'none';

/** A change of `limits set` (the CLI's flags, the dashboard's fields), every part optional. */
export interface LimitChange {
  perOrg?: Rate;
  /** With tokenId: that token's own limit; without: the default limit of every token. */
  perToken?: Rate;
  tokenId?: string;
  /** Permits kept for the organization's other clients: a count or a percent of perOrg. */
  reserve?: { count: number } | { share: number };
  /** The pacing buckets' size (acquire.lua "Pacing"). */
  burst?: Burst;
  /** The run window as checked canonical texts; a field left out keeps what is stored. */
  runWindow?: { windows?: string; tz?: string; blackout?: string };
  /** The error budget (judge-outcome.lua): the failure share that halts, or 'off'. */
  haltAt?: HaltAt;
  haltSample?: number;
}

/** The kinds' values in a stored policy (policy.ts LimitPolicy): null or empty where none is. */
export interface PolicyValues {
  perOrg: Rate | null;
  perToken: Rate | null;
  /** Tokens with a limit of their own (token id -> rate). */
  tokens: Record<string, Rate>;
  reserve: number;
  /** The share (percent) the reserve was set as, or null when set as a number. */
  reserveShare: number | null;
  /** The pacing burst stored; null (none or malformed): LIMIT_BURST applies. */
  burst: Burst | null;
  /** The run window's calendar texts as stored (null: none set). */
  runWindow: { windows: string; tz: string; blackout: string } | null;
  /** The error budget's rule; null (none or malformed): HALT_AT / HALT_SAMPLE apply. */
  haltAt: HaltAt | null;
  haltSample: number | null;
}

/** One flag of `limits set`: its option name, as typed, its help, and its parser. */
export interface LimitFlag {
  option: string;
  /** Its name inside its kind's change, for a kind of several flags. */
  part?: string;
  flag: string;
  help: string;
  /** The value, or an LT_USAGE error naming the flag and what it expects. */
  parse(text: string): unknown;
}

/** What `limits reset` does with a kind: back to LIMIT_*, removed, or kept. */
export type ResetRule = 'env' | 'remove' | 'keep';

/**
 * What the displays read of a peek (limiter/types.ts BudgetView is one; declared here to avoid a
 * cycle): a scope's limit now, the configured one under a learned one, its pacing.
 */
export interface ShownScope {
  limit: number;
  windowMs: number;
  learned?: { configured: number };
  pace?: { burst: number; intervalMs: number };
}

export interface ShownPeek {
  now: number;
  org: ShownScope;
  tokens: readonly ShownScope[];
  reserve: number;
  policyStored: boolean;
  runWindow?: RunWindowTexts;
}

/** One organization's kinds in force, for `limits show --json` and the dashboard's controls. */
export interface KindsShown {
  perOrg: string;
  perToken: string;
  reserve: number;
  reserveShare: string | null;
  /** What this tool may spend per org window: perOrg less the reserve. */
  usableOrgLimit: string;
  /** The pacing burst in force ("10%", "10"; "100%": off) and where it comes from. */
  burst: { value: string; stored: boolean };
  /** How the organization's bucket paces ("100 at once, then one every 1 min 26 s"); null: not. */
  orgPacing: string | null;
  /** The run window: its calendar and whether it is open now; null when none is set. */
  runWindow: RunWindowState | null;
  /** The error budget (docs/guard-rails.md): halting share, sample, and where from. */
  halt: { at: string; sample: number; stored: boolean };
}

/** Where values in force come from: the stored policy, this process's fallbacks, a peek. */
export interface ShownSource {
  policy: PolicyValues;
  config: Readonly<Pick<Config, 'limitPerOrg' | 'limitPerToken' | 'burst' | 'haltAt' | 'haltSample'>>;
  peek: ShownPeek;
}

/** How the dashboard words numbers and rates ("1,000", "100 per hour"). */
export interface ShownUnits {
  rate(rate: Rate): string;
  num(n: number): string;
}

/** A line of an organization's card on the overview, `<p data-{attr}="{org}">`. */
export interface CardLine {
  attr: string;
  text: string;
  /** In parentheses after the text, muted. */
  note?: string;
  /** Shown as a warning (it holds the work back now). */
  warn?: boolean;
  /** data-open="yes|no". */
  open?: boolean;
  /** Ends with a link to the organization's controls. */
  controls?: boolean;
}

/**
 * A kind's words in `limits show`, `status`, the dashboard's controls and overview. A kind shown
 * inside another's words (the reserve, the sample) has none.
 */
export interface KindWords {
  label: string;
  /** `set`: the LIMIT_* and HALT_* this process's environment sets. */
  show(l: KindsShown, set: readonly string[]): string;
  /** Its line under the organization in `status`; null when there is nothing to say now. */
  status?(p: ShownPeek): string | null;
  controls?(l: KindsShown): Array<{ label: string; attr: string; text: string }>;
  overview?(p: ShownPeek, units: ShownUnits): CardLine | null;
}

export interface LimitKind {
  /** Its name in LimitChange, LimitPolicy, the change log and the views. */
  key: keyof LimitChange;
  what: string;
  /** The fields of the policy hash it is stored in ('tok:' and the like: a prefix). */
  fields: readonly string[];
  /** Their stored form, as acquire.lua and includes/policy.lua read it. */
  stored: string;
  flags: readonly LimitFlag[];
  /** The LIMIT_* (or other) variable it falls back to where nothing is stored. */
  env?: string;
  reset: ResetRule;
  /** Its values from the policy hash (HGETALL). */
  decode(hash: Readonly<Record<string, string>>): Partial<PolicyValues>;
  /** What the change log keeps of it (readable values, never a secret). */
  log(p: PolicyValues): Record<string, unknown>;
  /** The hash fields a change of this kind sets and deletes; absent: setLimits writes it. */
  store?(change: LimitChange, set: Record<string, string>, del: string[]): void;
  /** Its values in force as the displays show them (KindsShown). */
  shown?(s: ShownSource): Partial<KindsShown>;
  words?: KindWords;
  /** Stored but not granted by (the error budget): shown after the learned limits. */
  guardRail?: true;
}

function usage(message: string): LearnerTransferError {
  return new LearnerTransferError('LT_USAGE', message);
}

function rate(flag: string): (text: string) => Rate {
  return (text) => {
    const read = readRate(text);
    if (!read.ok) throw usage(rateMessage(flag, text, read.why));
    return read.rate;
  };
}

/** A reserve as typed: "200" permits or "20%" of perOrg; undefined if neither. */
export function parseReserve(text: string): NonNullable<LimitChange['reserve']> | undefined {
  const share = /^\s*(\d+(?:\.\d+)?)\s*%\s*$/.exec(text);
  if (share) {
    const p = Number(share[1]);
    return p >= 0 && p <= 100 ? { share: p } : undefined;
  }
  if (/^\s*\d+\s*$/.test(text) && Number.isSafeInteger(Number(text))) return { count: Number(text) };
  return undefined;
}

/** A calendar parser's own LT_USAGE error stands as it is. */
const calendar =
  (parse: (text: string) => string) =>
  (text: string): string =>
    parse(text);

/**
 * A stored rate, or null when absent or out of rateInBounds. includes/policy.lua's lt_rate
 * refuses the same values (a test holds them), so "not stored" is what the limiter ignores.
 */
export function decodeRate(text: string | undefined): Rate | null {
  const m = /^(\d+)\/(\d+)$/.exec(text ?? '');
  if (!m) return null;
  const rate = { max: Number(m[1]), windowMs: Number(m[2]) };
  return rateInBounds(rate) ? rate : null;
}

/** Token ids and rates in id order, as the change log shows them. */
function byId<T, U>(record: Record<string, T>, show: (value: T) => U): Record<string, U> {
  return Object.fromEntries(
    Object.entries(record)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([id, v]) => [id, show(v)]),
  );
}

/** "max/windowMs", the form a rate is stored in (and acquire.lua parses). */
export function encodeRate(rate: Rate): string {
  return `${rate.max}/${rate.windowMs}`;
}

/** "10 at once, then one every 36 s" for a paced scope; null when it is not paced. */
export function pacingOf(s: { pace?: { burst: number; intervalMs: number } }): string | null {
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

/** Where an unstored burst comes from: LIMIT_BURST, or the built-in default. */
export function burstOrigin(l: Pick<KindsShown, 'burst'>, set: readonly string[]): string {
  if (l.burst.stored) return '';
  return set.includes('LIMIT_BURST')
    ? ' (LIMIT_BURST of this process: none stored)'
    : ` (the built-in default: LIMIT_BURST is not set, none stored)`;
}

/** Where an unstored error budget comes from: HALT_*, or the built-in defaults. */
export function haltOrigin(l: Pick<KindsShown, 'halt'>, set: readonly string[]): string {
  if (l.halt.stored) return '';
  const given = (['HALT_AT', 'HALT_SAMPLE'] as const).filter((v) => set.includes(v));
  if (given.length === 2) return ' (HALT_AT / HALT_SAMPLE of this process: none stored)';
  if (given.length === 0) return ' (the built-in defaults: HALT_AT and HALT_SAMPLE are not set, none stored)';
  const other = given[0] === 'HALT_AT' ? 'HALT_SAMPLE' : 'HALT_AT';
  return ` (${given[0]} of this process, ${other}'s built-in default: none stored)`;
}

/** The organization's limit, with its reserve and default per token. */
const ORG_WORDS: KindWords = {
  label: 'organization',
  show: (l) =>
    l.perOrg +
    (l.reserve > 0
      ? `, reserve ${l.reserve}${l.reserveShare ? ` (${l.reserveShare})` : ''} for its other clients: this tool spends at most ${l.usableOrgLimit}`
      : ', no reserve'),
  status: (p) => {
    const b = p.org;
    // The configured limits (a learned one is shown with the budget it holds).
    const rate = (x: ShownScope) =>
      formatRate({ max: x.learned?.configured ?? x.limit, windowMs: x.windowMs });
    const tokenRates = [...new Set(p.tokens.map(rate))];
    return (
      `limits${p.policyStored ? ' (Redis)' : ' (LIMIT_*: none stored yet)'}: ` +
      `${formatRate({ max: (b.learned?.configured ?? b.limit) + p.reserve, windowMs: b.windowMs })} per organization` +
      (p.reserve > 0 ? ` less a reserve of ${p.reserve} (${rate(b)} for this tool)` : '') +
      `, ${tokenRates.join(' / ') || '-'} per token`
    );
  },
  controls: (l) => [
    { label: 'organization', attr: 'perOrg', text: l.perOrg },
    {
      label: 'reserve for its other clients',
      attr: 'reserve',
      text: `${l.reserve}${l.reserveShare ? ` (${l.reserveShare})` : ''}`,
    },
    { label: 'this tool spends at most', attr: 'usable', text: l.usableOrgLimit },
  ],
  overview: (p, u) => {
    const perOrg = u.rate({ max: p.org.limit + p.reserve, windowMs: p.org.windowMs });
    const perToken = [...new Set(p.tokens.map((t) => u.rate({ max: t.limit, windowMs: t.windowMs })))];
    const usable = u.rate({ max: Math.max(0, p.org.limit), windowMs: p.org.windowMs });
    return {
      attr: 'limits',
      controls: true,
      text:
        `limits${p.policyStored ? '' : ' (LIMIT_*: none stored in Redis yet)'}: ${perToken.join(' / ') || '-'} ` +
        `per token, ${perOrg} per organization` +
        (p.reserve > 0 ? ` less a reserve of ${u.num(p.reserve)} (${usable} for this tool)` : ''),
    };
  },
};

const PER_TOKEN_WORDS: KindWords = {
  label: 'per token',
  show: (l) => `${l.perToken} (default)`,
  controls: (l) => [{ label: 'per token (default)', attr: 'perToken', text: l.perToken }],
};

/** The scopes' pacing, each distinct token pacing once. */
function pacedScopes(p: ShownPeek, tokens: string): string[] {
  const org = pacingOf(p.org);
  const paced = [...new Set(p.tokens.map(pacingOf).filter((x): x is string => x !== null))];
  return [
    ...(org ? [`the organization ${org}`] : []),
    ...paced.map((x) => `${p.tokens.length === 1 ? 'the token' : tokens} ${x}`),
  ];
}

const BURST_WORDS: KindWords = {
  label: 'pacing',
  show: (l, set) =>
    `burst ${l.burst.value}${burstOrigin(l, set)}${
      l.orgPacing ? `; the organization ${l.orgPacing}` : '; the organization is not paced'
    }`,
  status: (p) => {
    const paced = pacedScopes(p, 'tokens');
    return paced.length > 0 ? `pacing: ${paced.join('; ')}` : null;
  },
  overview: (p) => {
    const paced = pacedScopes(p, 'each token');
    return paced.length > 0 ? { attr: 'pacing', text: `pacing: ${paced.join('; ')}` } : null;
  },
};

const RUN_WINDOW_WORDS: KindWords = {
  label: 'run window',
  show: (l) =>
    l.runWindow
      ? `${l.runWindow.windows} (${l.runWindow.tz})${l.runWindow.blackout ? `, blackout ${l.runWindow.blackout}` : ''}: ${l.runWindow.now}`
      : 'none: transfers may run at any hour',
  status: (p) => {
    const w = runWindowOf(p, p.now);
    if (!w) return null;
    return (
      `run window: ${w.windows} (${w.tz})${w.blackout ? `, blackout ${w.blackout}` : ''}: ` +
      (w.open ? w.now : `waiting for the run window (${w.now})`)
    );
  },
  overview: (p) => {
    const w = runWindowOf(p, p.now);
    if (!w) return null;
    return {
      attr: 'run-window',
      warn: !w.open,
      open: w.open,
      text: w.open ? `run window ${w.now}` : `waiting for the run window, ${w.now}`,
      note: `${w.windows}, ${w.tz}${w.blackout ? `; blackout ${w.blackout}` : ''}`,
    };
  },
};

const HALT_WORDS: KindWords = {
  label: 'error budget',
  show: (l, set) =>
    (l.halt.at === 'off'
      ? 'off: never halts'
      : `halts at ${l.halt.at} failures of the last ${l.halt.sample} outcomes`) + haltOrigin(l, set),
};

/** The kinds of limit, in the order `limits show` and `limits set --help` list them. */
export const LIMIT_KINDS: readonly LimitKind[] = [
  {
    key: 'perOrg',
    what: "the organization's limit: permits per window, all its tokens together",
    fields: ['org'],
    stored: 'org = "max/windowMs"',
    flags: [
      {
        option: 'perOrg',
        flag: '--per-org <N/DUR>',
        help: "the organization's limit, like 1000/1d",
        parse: rate('--per-org'),
      },
    ],
    env: 'LIMIT_PER_ORG',
    reset: 'env',
    decode: (hash) => ({ perOrg: decodeRate(hash.org) }),
    log: (p) => ({ perOrg: p.perOrg ? formatRate(p.perOrg) : null }),
    store: (change, set) => {
      if (change.perOrg) set.org = encodeRate(change.perOrg);
    },
    shown: (s) => ({ perOrg: formatRate(s.policy.perOrg ?? s.config.limitPerOrg) }),
    words: ORG_WORDS,
  },
  {
    key: 'perToken',
    what: "a token's limit: the default of every token, or one token's own (tok:<id>)",
    fields: ['token', 'tok:'],
    stored: 'token = "max/windowMs" (every token), tok:<id> = "max/windowMs" (one token)',
    flags: [
      {
        option: 'perToken',
        flag: '--per-token <N/DUR>',
        help: 'the limit of each token (with --token: of that token only), like 100/1h',
        parse: rate('--per-token'),
      },
    ],
    env: 'LIMIT_PER_TOKEN',
    reset: 'env',
    decode: (hash) => {
      const tokens: Record<string, Rate> = {};
      for (const [field, value] of Object.entries(hash)) {
        const rate = field.startsWith('tok:') ? decodeRate(value) : null;
        if (rate) tokens[field.slice(4)] = rate;
      }
      return { perToken: decodeRate(hash.token), tokens };
    },
    log: (p) => ({
      perToken: p.perToken ? formatRate(p.perToken) : null,
      tokens: byId(p.tokens, formatRate),
    }),
    store: (change, set) => {
      if (change.perToken)
        set[change.tokenId ? `tok:${change.tokenId}` : 'token'] = encodeRate(change.perToken);
    },
    shown: (s) => ({ perToken: formatRate(s.policy.perToken ?? s.config.limitPerToken) }),
    words: PER_TOKEN_WORDS,
  },
  {
    key: 'reserve',
    what: "permits of each organization window kept for the organization's other clients",
    fields: ['reserve', 'reserveShare'],
    stored:
      'reserve = N permits; reserveShare = P when given as a share, re-resolved when `org` changes (change-policy.lua)',
    flags: [
      {
        option: 'reserve',
        flag: '--reserve <N|P%>',
        help: "permits of each organization window kept for the organization's other clients (a number, or a share of --per-org)",
        parse: (text) => {
          const reserve = parseReserve(text);
          if (reserve) return reserve;
          throw usage(
            `--reserve expects a number of permits (like 200) or a share of the organization's limit (like 20%), got '${text}'`,
          );
        },
      },
    ],
    reset: 'remove',
    decode: (hash) => {
      const reserve = Number(hash.reserve ?? 0);
      const share = hash.reserveShare === undefined ? NaN : Number(hash.reserveShare);
      return {
        reserve: Number.isFinite(reserve) && reserve > 0 ? Math.floor(reserve) : 0,
        reserveShare: Number.isFinite(share) ? share : null,
      };
    },
    log: (p) => ({
      reserve: p.reserve,
      ...(p.reserveShare !== null ? { reserveShare: `${p.reserveShare}%` } : {}),
    }),
    store: (change, set, del) => {
      if (!change.reserve || !('count' in change.reserve)) return;
      set.reserve = String(change.reserve.count);
      del.push('reserveShare');
    },
    // Shown in the organization's words.
    shown: ({ policy, config }) => {
      const perOrg = policy.perOrg ?? config.limitPerOrg;
      return {
        reserve: policy.reserve,
        reserveShare: policy.reserveShare === null ? null : `${policy.reserveShare}%`,
        usableOrgLimit: `${Math.max(0, perOrg.max - policy.reserve)}/${formatDuration(perOrg.windowMs)}`,
      };
    },
  },
  {
    key: 'burst',
    what: 'the pacing buckets\' size: permits a scope sends at once before one per window/limit (acquire.lua "Pacing")',
    fields: ['burst'],
    stored: 'burst = "N" | "P%" (core/burst.ts; includes/policy.lua lt_burst)',
    flags: [
      {
        option: 'burst',
        flag: '--burst <N|P%|off>',
        help: 'pacing: how many permits a token (and the organization) may send at once before one per window/limit; a number, a share of each limit, or off (the windows alone)',
        parse: (text) => {
          const burst = parseBurst(text);
          if (burst) return burst;
          throw usage(burstMessage('--burst', text));
        },
      },
    ],
    env: 'LIMIT_BURST',
    reset: 'env',
    decode: (hash) => ({ burst: hash.burst === undefined ? null : (decodeBurst(hash.burst) ?? null) }),
    log: (p) => (p.burst ? { burst: encodeBurst(p.burst) } : {}),
    store: (change, set) => {
      if (change.burst) set.burst = encodeBurst(change.burst);
    },
    shown: (s) => ({
      burst: { value: encodeBurst(s.policy.burst ?? s.config.burst), stored: s.policy.burst !== null },
      orgPacing: pacingOf(s.peek.org),
    }),
    words: BURST_WORDS,
  },
  {
    key: 'runWindow',
    what: 'when transfers may run: a weekly calendar in a time zone, with blackout days (run-window.ts)',
    fields: ['runWindow', 'tz', 'blackout', 'open'],
    stored:
      'runWindow, tz, blackout: the calendar as written (canonical: run-window.ts); open = "horizon s e ...": the same as UTC instants (run-window-open.ts)',
    flags: [
      {
        option: 'runWindow',
        part: 'windows',
        flag: '--run-window <windows>',
        help: 'when transfers may run, like "Mon-Fri 18:00-07:00, Sat-Sun all" (days, then HH:MM-HH:MM or all)',
        parse: calendar((text) => formatRunWindow(parseRunWindow(text))),
      },
      {
        option: 'tz',
        part: 'tz',
        flag: '--tz <zone>',
        help: 'the time zone of --run-window and --blackout, like Europe/Berlin (default UTC)',
        parse: calendar(checkTimeZone),
      },
      {
        option: 'blackout',
        part: 'blackout',
        flag: '--blackout <dates>',
        help: 'days with no transfer at all, like 2026-12-21..2027-01-06 (a comma-separated list; "none" removes them)',
        parse: calendar((text) =>
          ['none', ''].includes(text.trim().toLowerCase()) ? '' : formatBlackouts(parseBlackouts(text)),
        ),
      },
    ],
    reset: 'keep',
    decode: (hash) => ({
      runWindow:
        hash.runWindow || hash.blackout
          ? { windows: hash.runWindow ?? '', tz: hash.tz ?? '', blackout: hash.blackout ?? '' }
          : null,
    }),
    log: (p) =>
      p.runWindow
        ? {
            runWindow: {
              windows: p.runWindow.windows || 'all all',
              tz: p.runWindow.tz || 'UTC',
              ...(p.runWindow.blackout ? { blackout: p.runWindow.blackout } : {}),
            },
          }
        : {},
    shown: (s) => ({ runWindow: runWindowOf(s.peek, s.peek.now) }),
    words: RUN_WINDOW_WORDS,
  },
  {
    key: 'haltAt',
    what: 'the error budget: the share of the last outcomes that failed at which the organization halts',
    fields: ['haltAt'],
    stored: 'haltAt = "P" | "off" (judge-outcome.lua)',
    flags: [
      {
        option: 'haltAt',
        flag: '--halt-at <P%|off>',
        help: 'the error budget: halt the organization when this share of its last outcomes failed (like 50%), or off',
        parse: (text) => {
          const at = parseHaltAt(text);
          if (at !== undefined) return at;
          throw usage(`--halt-at expects ${HALT_AT_EXPECTED}, got '${text}'`);
        },
      },
    ],
    env: 'HALT_AT',
    reset: 'remove',
    decode: (hash) => ({ haltAt: hash.haltAt === undefined ? null : (parseHaltAt(hash.haltAt) ?? null) }),
    log: (p) => (p.haltAt !== null ? { haltAt: formatHaltAt(p.haltAt) } : {}),
    store: (change, set) => {
      if (change.haltAt !== undefined) set.haltAt = String(change.haltAt);
    },
    // With the sample: the error budget's words say both.
    shown: ({ policy, config }) => ({
      halt: {
        at: formatHaltAt(policy.haltAt ?? config.haltAt),
        sample: policy.haltSample ?? config.haltSample,
        stored: policy.haltAt !== null || policy.haltSample !== null,
      },
    }),
    words: HALT_WORDS,
    guardRail: true,
  },
  {
    key: 'haltSample',
    what: 'the error budget: how many of the last final outcomes it judges',
    fields: ['haltSample'],
    stored: 'haltSample = N',
    flags: [
      {
        option: 'haltSample',
        flag: '--halt-sample <N>',
        help: 'the error budget: how many of the last final outcomes it judges (default HALT_SAMPLE, 20)',
        parse: (text) => {
          const n = parseHaltSample(text);
          if (n !== undefined) return n;
          throw usage(`--halt-sample expects ${HALT_SAMPLE_EXPECTED}, got '${text}'`);
        },
      },
    ],
    env: 'HALT_SAMPLE',
    reset: 'remove',
    decode: (hash) => ({
      haltSample: hash.haltSample === undefined ? null : (parseHaltSample(hash.haltSample) ?? null),
    }),
    log: (p) => (p.haltSample !== null ? { haltSample: p.haltSample } : {}),
    store: (change, set) => {
      if (change.haltSample !== undefined) set.haltSample = String(change.haltSample);
    },
    guardRail: true,
  },
];

/** Every flag of `limits set` that changes a kind, in the order of LIMIT_KINDS. */
export const LIMIT_FLAGS: readonly LimitFlag[] = LIMIT_KINDS.flatMap((k) => k.flags);

/** Whether a change changes any kind (a token id alone does not). */
export function changesAnything(change: LimitChange): boolean {
  return LIMIT_KINDS.some((k) => change[k.key] !== undefined);
}

/** "--per-org, --per-token, ... or --halt-sample": the flags, for a message. */
export function flagList(): string {
  const names = LIMIT_FLAGS.map((f) => f.flag.split(' ')[0] as string);
  return `${names.slice(0, -1).join(', ')} or ${names.at(-1) ?? ''}`;
}

/** The change asked for by parsed flags; the run window's three flags make one part. */
export function changeOfFlags(opts: Readonly<Record<string, unknown>>): LimitChange {
  const change: Record<string, unknown> = {};
  for (const kind of LIMIT_KINDS) {
    const given = kind.flags.filter((f) => opts[f.option] !== undefined);
    if (given.length === 0) continue;
    if (kind.flags.length === 1) change[kind.key] = opts[kind.flags[0]?.option ?? ''];
    else {
      const part: Record<string, unknown> = {};
      for (const f of given) part[f.part ?? f.option] = opts[f.option];
      change[kind.key] = part;
    }
  }
  if (typeof opts.token === 'string') change.tokenId = opts.token;
  return change as LimitChange;
}

/** The hash fields `limits reset` removes outright (not back to LIMIT_*). */
export function resetRemoves(): string[] {
  return LIMIT_KINDS.filter((k) => k.reset === 'remove').flatMap((k) => [...k.fields]);
}

/** Every kind's values from the policy hash (HGETALL). */
export function decodeKinds(hash: Readonly<Record<string, string>>): PolicyValues {
  return Object.assign({}, ...LIMIT_KINDS.map((k) => k.decode(hash))) as PolicyValues;
}

/** What the change log keeps of every kind, in the order of LIMIT_KINDS. */
export function logKinds(p: PolicyValues): Record<string, unknown> {
  return Object.assign({}, ...LIMIT_KINDS.map((k) => k.log(p))) as Record<string, unknown>;
}

/** Every kind's values in force, as the displays show them (ops/views/limits.ts collectLimits). */
export function shownKinds(s: ShownSource): KindsShown {
  return Object.assign({}, ...LIMIT_KINDS.map((k) => k.shown?.(s) ?? {})) as KindsShown;
}

/** The kinds' words: those granted by, then the guard rails (or one group alone). */
export function kindWords(guardRails?: boolean): KindWords[] {
  if (guardRails === undefined) return [...kindWords(false), ...kindWords(true)];
  return LIMIT_KINDS.filter((k) => (k.guardRail === true) === guardRails).flatMap((k) =>
    k.words ? [k.words] : [],
  );
}
