// Every kind of limit and every refusal scope of the budget, named once: what each is, the fields of the
// policy hash it is stored in (policy.ts), the `limits set` flags that change it and how they are parsed,
// what `limits reset` does with it. The limiter, the ETA, `limits`, `status` and the dashboard read these
// lists. A new kind starts here: docs/architecture.md, "Adding a limit kind", lists the other files.
import { LearnerTransferError } from '../core/errors.ts';
import { burstMessage, decodeBurst, encodeBurst, parseBurst, type Burst } from '../core/burst.ts';
import { formatRate, rateInBounds, rateMessage, readRate, type Rate } from '../core/duration.ts';
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
} from './run-window.ts';

/**
 * What a refusal of acquire can name (acquire.lua returns the name): the scope whose wait is the longest.
 * `lasts`: it holds until someone acts or a block ends (the notifications call the organization held);
 * the others pass by themselves (budget, pacing, the run window, another attempt's lease). `eta`: the
 * ETA's simulation books its waits to it (limiter/simulate/).
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

/**
 * What the ETA says held the work back: the scopes the simulation waits for, in the order a tie is
 * broken (the organization's window first), or 'none' (it fits the budget left now).
 */
export const ETA_BOUNDS = ['org', 'token', 'pace', 'run-window'] as const satisfies readonly EtaScope[];
export type EtaBound = (typeof ETA_BOUNDS)[number] | 'none';

/** A change of `limits set` (the CLI's flags, the dashboard's fields), every part optional. */
export interface LimitChange {
  perOrg?: Rate;
  /** With tokenId: that token's own limit; without: the default limit of every token. */
  perToken?: Rate;
  tokenId?: string;
  /** Permits kept for the organization's other clients, as a number or a share (percent) of perOrg. */
  reserve?: { count: number } | { share: number };
  /** The pacing buckets' size (acquire.lua "Pacing"). */
  burst?: Burst;
  /**
   * The run window, in the canonical texts of run-window.ts (already parsed and checked): a field left
   * out keeps what is stored. A blackout without a window means every other day is open.
   */
  runWindow?: { windows?: string; tz?: string; blackout?: string };
  /** The error budget (judge-outcome.lua): the share of failures that halts, or 'off', and the sample size. */
  haltAt?: HaltAt;
  haltSample?: number;
}

/**
 * The kinds' values in a stored policy (policy.ts LimitPolicy has them, and what else the hash holds):
 * null or empty where nothing is stored.
 */
export interface PolicyValues {
  perOrg: Rate | null;
  perToken: Rate | null;
  /** Tokens with a limit of their own (token id -> rate). */
  tokens: Record<string, Rate>;
  reserve: number;
  /** The share (percent) the reserve was set as, or null when set as a number. */
  reserveShare: number | null;
  /** The pacing burst stored (null: none, or malformed: the process's LIMIT_BURST applies). */
  burst: Burst | null;
  /** The run window's calendar texts as stored (null: none set). */
  runWindow: { windows: string; tz: string; blackout: string } | null;
  /** The error budget's rule as stored (null: none, or malformed: HALT_AT / HALT_SAMPLE apply). */
  haltAt: HaltAt | null;
  haltSample: number | null;
}

/** One flag of `limits set`: its name in the parsed options, as typed, its help, and its parser. */
export interface LimitFlag {
  option: string;
  /** Its name inside its kind's change when the kind has several flags (the run window's). */
  part?: string;
  flag: string;
  help: string;
  /** The value, or a LearnerTransferError (LT_USAGE) naming the flag and what it expects. */
  parse(text: string): unknown;
}

/** What `limits reset` does with a kind: back to LIMIT_* ('env'), removed ('remove'), or kept ('keep'). */
export type ResetRule = 'env' | 'remove' | 'keep';

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
  /** What the change log keeps of it (readable values, never a secret; nothing when not stored). */
  log(p: PolicyValues): Record<string, unknown>;
  /** The hash fields of a change of this kind (set, deleted); absent: written by setLimits (Redis state). */
  store?(change: LimitChange, set: Record<string, string>, del: string[]): void;
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

/**
 * A reserve as written by a person: a whole number of permits ("200") or a share of the organization's
 * limit ("20%", 0-100). Undefined when it is neither; each caller words the error for its own input.
 */
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
 * A stored rate, or null when absent or malformed: outside the bounds every writer checks (duration.ts
 * rateInBounds). includes/policy.lua's lt_rate refuses exactly the same values (a test holds them
 * together), so what a display shows as "not stored" is what the limiter ignores.
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

/**
 * The change asked for by parsed flags (each named by its LimitFlag.option, plus `token`): the run
 * window's three flags make one part.
 */
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

/** The hash fields `limits reset` removes outright (the kinds that go back to nothing, not to LIMIT_*). */
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
