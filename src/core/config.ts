// One zod schema turns the environment into a frozen Config, once, at the edge. Every error names the
// variable, the expected form and the bad value, except for token values, which are never echoed.
import { z } from 'zod';
import { burstMessage, DEFAULT_BURST, parseBurst, type Burst } from './burst.ts';
import { parseDuration, rateMessage, readRate, type Rate } from './duration.ts';
import { readEgress, proxySecrets, type Egress } from './egress.ts';
import { ConfigError } from './errors.ts';
import { LOG_FORMATS, type LogFormatSetting } from './log-text.ts';
import { redisTargetFrom, type RedisTarget } from './redis-target.ts';
import { readTokenFile, TOKENS_FILE_VAR } from './token-file.ts';
import { webhookSecrets } from './webhook-url.ts';
import { readTokenEntry, tokenRef, TOKEN_ENTRY_FORM, type TokenRef } from './token-ref.ts';
import { tracingEnvFields, tracingSettings, type TracingSettings } from './tracing-config.ts';
import {
  DEFAULT_HALT_AT,
  DEFAULT_HALT_SAMPLE,
  DEFAULT_HALT_STORM,
  HALT_AT_EXPECTED,
  HALT_SAMPLE_EXPECTED,
  parseHaltAt,
  parseHaltSample,
  type HaltAt,
} from './halt-rule.ts';

export { tokenFingerprint, type TokenRef } from './token-ref.ts';

export interface Config {
  /** REDIS_URL, or REDIS_CLUSTER_NODES, or REDIS_SENTINELS + REDIS_SENTINEL_MASTER (see core/redis-target.ts). */
  redis: RedisTarget;
  queuePrefix: string;
  apiBaseUrl: string | undefined;
  userAgent: string;
  /** The tokens at start; `work` follows a token file's changes through its TokenBook (ctx.tokens). */
  tokens: readonly TokenRef[];
  /** Organization keys in the order they first appear in LEARNER_API_TOKENS (or its file). */
  orgs: readonly string[];
  /** LEARNER_API_TOKENS_FILE: where the tokens were read from, read again by `work` to follow changes. */
  tokensFile: string | undefined;
  /** TOKENS_RELOAD_INTERVAL: how often `work` reads the token file again (0: only on SIGHUP). */
  tokensReloadMs: number;
  limitPerToken: Rate;
  limitPerOrg: Rate;
  /** LIMIT_BURST: the pacing buckets' size where the stored policy has none (core/burst.ts). */
  burst: Burst;
  /** The LIMIT_* the environment sets (the others are built-in defaults, and nobody's setting). */
  limitVariablesSet?: readonly ('LIMIT_PER_TOKEN' | 'LIMIT_PER_ORG' | 'LIMIT_BURST')[];
  /** USER_AGENT is set: unset, the generic DEFAULT_USER_AGENT is sent (and the service calls warn once). */
  userAgentSet?: boolean;
  requestTimeoutMs: number;
  connectTimeoutMs: number;
  concurrency: number;
  attempts: number;
  backoffMs: number;
  logLevel: string;
  /** LOG_FORMAT: json, text (one plain sentence a line), or auto: text when stderr is a terminal. */
  logFormat: LogFormatSetting;
  /** SPOOL_DIR: where `work` keeps responses until they are in Redis (a persistent disk). */
  spoolDir: string;
  /**
   * SCHEDULE_DIR: the only directory a scheduled (control) reconcile reads its desired file from;
   * unset, scheduled reconciles are refused.
   */
  scheduleDir: string | undefined;
  /** LEASE_GRACE: how long an expired lease of another worker is contested before it is taken over. */
  leaseGraceMs: number;
  /** REPAIR_INTERVAL: how often `work` looks for learners left without a job (and jobs without a record). */
  repairIntervalMs: number;
  /**
   * RUN_RETENTION: runs older than this are compacted by `work` (their per-organization counters and
   * failure indexes folded into one summary; ops/actions/run-retention.ts); 0 keeps every run whole.
   */
  runRetentionMs: number;
  /** DRIFT_REPORT_DIR: where a reconcile that found drift writes its report (unset: out/). */
  driftReportDir: string | undefined;
  /**
   * CRAWL_MAX_PAGES: the most pages a crawl or reconcile believes the learner list has; a service that
   * claims more stops the walk with an error (a service claiming a billion pages is not walked).
   */
  crawlMaxPages: number;
  /** REDIS_CONNECT_TIMEOUT: how long to wait for Redis at start; unset = the command's own default. */
  redisConnectTimeoutMs: number | undefined;
  /** REDIS_WAIT_TIMEOUT: how long a durable write waits for a replica (0: no WAIT). */
  redisWaitTimeoutMs: number;
  /** REDIS_HIGH_WATER: share of Redis's maxmemory above which workers hold back (0 < ratio <= 1). */
  redisHighWater: number;
  /**
   * REDIS_MAX_CONNECTIONS: the most Redis connections one `work` process holds, whatever the number of
   * organizations (3 it always holds, and one per queue worker attached at a time: worker/lanes.ts).
   */
  redisMaxConnections: number;
  /**
   * Password of the dashboard (Bearer or HTTP basic). Non-enumerable like token secrets, so a
   * JSON.stringify of the config never carries it.
   */
  readonly dashboardToken?: string | undefined;
  /**
   * DASHBOARD_READ_TOKEN: the viewer's password on the same dashboard: every page, no action. Needs
   * DASHBOARD_TOKEN beside it (a viewer token alone would leave nobody who may act, or, read the other
   * way, an open dashboard that only viewers log in to). Non-enumerable like dashboardToken.
   */
  readonly dashboardReadToken?: string | undefined;
  /** DASHBOARD_TLS_CERT / DASHBOARD_TLS_KEY: PEM files; with both, the dashboard serves HTTPS. */
  dashboardTlsCert?: string | undefined;
  dashboardTlsKey?: string | undefined;
  /** AUDIT_ARCHIVE_DIR: where `work` archives the audit stream (gzip NDJSON by day) and then trims it. */
  auditArchiveDir?: string | undefined;
  /** AUDIT_ARCHIVE_INTERVAL: how often `work` archives (and at its graceful stop). */
  auditArchiveIntervalMs: number;
  /**
   * AUDIT_PERSONAL_RETENTION: past it, the e-mail addresses and names of audit entries are removed
   * (ops/audit/retention.ts); 0 (the default) keeps them. Needs AUDIT_ARCHIVE_DIR.
   */
  auditPersonalRetentionMs: number;
  /**
   * The way out to the Learner API: the proxy variables, and LEARNER_API_TLS_CA / _CERT / _KEY (their paths
   * and contents; core/egress.ts). Non-enumerable: a proxy URL may carry a password, and the key is a secret.
   */
  readonly egress: Egress;
  /**
   * NOTIFY_WEBHOOK_URL: where `work` posts notifications (ops/notify/notifier.ts). A secret as a whole (a Slack
   * webhook's path is its key): non-enumerable like the dashboard's token, scrubbed from every log line.
   */
  readonly notifyWebhookUrl?: string | undefined;
  /** NOTIFY_FAILURE_SHARE: the share of a run's finished learners that failed above which it is said (0 < r <= 1). */
  notifyFailureShare: number;
  /** NOTIFY_BLOCKED_AFTER: an organization with work paused or blocked this long is said (0: never). */
  notifyBlockedAfterMs: number;
  /** NOTIFY_STALL_AFTER: learners due this long that no worker took, with budget there, are said (0: never). */
  notifyStallAfterMs: number;
  /** HALT_AT: the share of an organization's sample of failures that halts it (percent), or 'off'. */
  haltAt: HaltAt;
  /** HALT_SAMPLE: how many of an organization's last final outcomes the error budget judges. */
  haltSample: number;
  /** The HALT_* the environment sets (the others are built-in defaults): `limits show` says which. */
  haltVariablesSet?: readonly ('HALT_AT' | 'HALT_SAMPLE')[];
  /** HALT_STORM: how long a 5xx storm may last before it halts the organization (ms; 0: never). */
  haltStormMs: number;
  /** OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_TRACES_EXPORTER / OTEL_SERVICE_NAME: tracing on; undefined: off. */
  tracing: TracingSettings | undefined;
}

export type Env = Record<string, string | undefined>;

export const DEFAULT_USER_AGENT = 'learner-transfer/0.1 (bulk learner transfer worker)';

/** CRAWL_MAX_PAGES by default: 1,000,000 learners at the spec's 100 a page. */
export const DEFAULT_CRAWL_MAX_PAGES = 10_000;

export const MIN_DISTINCT_TOKEN_CHARS = 8;

/**
 * A dashboard token an attacker could guess: fewer than 8 distinct characters, or a low Shannon
 * entropy (under 3 bits per character, e.g. one character repeated most of the time).
 */
export function isWeakToken(token: string): boolean {
  const counts = new Map<string, number>();
  for (const c of token) counts.set(c, (counts.get(c) ?? 0) + 1);
  if (counts.size < MIN_DISTINCT_TOKEN_CHARS) return true;
  const n = [...token].length;
  let bits = 0;
  for (const k of counts.values()) bits -= (k / n) * Math.log2(k / n);
  return bits < 3;
}

/**
 * A URL's password replaced by `***`, even in a URL that does not parse (`redis//:pw@host`,
 * `http://user:p/w@host`): everything from the user's `:` to the last `@` is hidden (all of the
 * user part when it has no `:`, since Redis may take a lone user part as the password).
 */
export function maskUrlPassword(text: string): string {
  const at = text.lastIndexOf('@');
  if (at < 0) return text;
  const slashes = text.indexOf('//');
  const from = slashes >= 0 && slashes < at ? slashes + 2 : 0;
  const userinfo = text.slice(from, at);
  const colon = userinfo.indexOf(':');
  return `${text.slice(0, from)}${colon >= 0 ? `${userinfo.slice(0, colon)}:***` : '***'}${text.slice(at)}`;
}

/** Formats the value of a bad variable for a message: quoted, shortened, never for secrets. */
function shown(value: string): string {
  const v = value.length > 60 ? `${value.slice(0, 57)}...` : value;
  return `'${v}'`;
}

const rateField = (name: string, fallback: string) =>
  z
    .string()
    .default(fallback)
    .transform((text, ctx) => {
      // The same parser and message as `limits set` and the dashboard (duration.ts readRate).
      const read = readRate(text);
      if (!read.ok) {
        ctx.addIssue({ code: 'custom', message: rateMessage(name, text, read.why) });
        return z.NEVER;
      }
      return read.rate;
    });

const intField = (name: string, fallback: number, min: number, max: number) =>
  z
    .string()
    .default(String(fallback))
    .transform((text, ctx) => {
      const n = Number(text.trim());
      if (!/^\s*\d+\s*$/.test(text) || !Number.isSafeInteger(n) || n < min || n > max) {
        ctx.addIssue({
          code: 'custom',
          message: `${name}: expected a whole number from ${min} to ${max}, got ${shown(text)}`,
        });
        return z.NEVER;
      }
      return n;
    });

/** A duration variable; with `zeroTurnsOff`, a plain `0` is accepted too (the feature is off). */
const durationField = (name: string, fallback: string, zeroTurnsOff = false) =>
  z
    .string()
    .default(fallback)
    .transform((text, ctx) => {
      const ms = zeroTurnsOff && text.trim() === '0' ? 0 : parseDuration(text);
      if (ms === undefined) {
        ctx.addIssue({
          code: 'custom',
          message: `${name}: expected a duration like 30s or 1500ms (units ms, s, m, h, d)${zeroTurnsOff ? ', or 0 for none' : ''}, got ${shown(text)}`,
        });
        return z.NEVER;
      }
      return ms;
    });

/** "90%" or "0.9": a share of Redis's maxmemory, from 1% to 100%. */
export function parseHighWater(text: string): number | undefined {
  const t = text.trim();
  const pct = /^(\d+(?:\.\d+)?)\s*%$/.exec(t);
  const ratio = pct ? Number(pct[1]) / 100 : /^(?:0?\.\d+|0|1(?:\.0*)?)$/.test(t) ? Number(t) : NaN;
  return Number.isFinite(ratio) && ratio >= 0.01 && ratio <= 1 ? ratio : undefined;
}

const boolField = (name: string) =>
  z
    .string()
    .optional()
    .transform((text, ctx) => {
      if (text === undefined) return undefined;
      const t = text.trim().toLowerCase();
      if (['1', 'true', 'yes', 'on'].includes(t)) return true;
      if (['0', 'false', 'no', 'off'].includes(t)) return false;
      ctx.addIssue({ code: 'custom', message: `${name}: expected true or false, got ${shown(text)}` });
      return z.NEVER;
    });

/** The form of a Redis URL, for the message that refuses one. */
export const REDIS_URL_FORM = 'redis://[user:password@]host:6379[/db], or rediss://... for TLS';

const urlField = (name: string, protocols: string[], form?: string) =>
  z.string().transform((text, ctx) => {
    let url: URL | undefined;
    try {
      url = new URL(text);
    } catch {
      url = undefined;
    }
    if (!url || !protocols.includes(url.protocol)) {
      ctx.addIssue({
        code: 'custom',
        message:
          `${name}: expected a ${protocols.map((p) => p.replace(':', '')).join(' or ')} URL, got ${shown(maskUrlPassword(text))}` +
          (form ? ` (the form: ${form})` : ''),
      });
      return z.NEVER;
    }
    return text.replace(/\/+$/, '');
  });

const tokensField = z
  .string()
  .default('')
  .transform((text, ctx) => {
    const tokens: TokenRef[] = [];
    const seen = new Set<string>();
    const parts = text
      .split(',')
      .map((p) => p.trim())
      .filter((p) => p.length > 0);
    parts.forEach((part, i) => {
      // Never echo the pair: it holds the secret. Name its position and the org key only.
      const entry = readTokenEntry(part);
      if (!entry.ok) {
        ctx.addIssue({
          code: 'custom',
          message:
            `LEARNER_API_TOKENS: entry ${i + 1} is not ${TOKEN_ENTRY_FORM} ` +
            `(like acme:TOKEN1,acme:TOKEN2,beta:TOKEN3)` +
            (entry.why === 'empty-token' ? ` (org '${entry.org}' has an empty token)` : ''),
        });
        return;
      }
      if (seen.has(entry.secret)) {
        ctx.addIssue({
          code: 'custom',
          message: `LEARNER_API_TOKENS: entry ${i + 1} (org '${entry.org}') repeats a token given earlier`,
        });
        return;
      }
      seen.add(entry.secret);
      tokens.push(tokenRef(entry.org, entry.secret));
    });
    return tokens;
  });

const pathField = (name: string) =>
  z.string().refine((d) => d.trim().length > 0 && !/[\0\r\n]/.test(d), {
    error: (iss) => `${name}: expected a file path, got ${shown(String(iss.input))}`,
  });

/** A dashboard token: 16+ characters without spaces, not weak; errors name the variable, never the value. */
function dashboardTokenField(name: string) {
  return z
    .string()
    .refine((t) => t.length >= 16 && !/\s/.test(t), {
      error: `${name}: expected at least 16 characters without spaces (the value is not shown)`,
    })
    .refine((t) => !isWeakToken(t), {
      error: `${name}: too weak: expected at least ${MIN_DISTINCT_TOKEN_CHARS} distinct characters and no long repeats (generate one with: openssl rand -hex 24; the value is not shown)`,
    })
    .optional();
}

const envSchema = z.object({
  REDIS_URL: urlField('REDIS_URL', ['redis:', 'rediss:'], REDIS_URL_FORM).default('redis://127.0.0.1:6379'),
  // Redis Cluster (seed nodes) or Sentinel: either one replaces REDIS_URL (checked in core/redis-target.ts).
  REDIS_CLUSTER_NODES: z.string().optional(),
  REDIS_SENTINELS: z.string().optional(),
  REDIS_SENTINEL_MASTER: z.string().optional(),
  // Credentials of the data nodes in cluster and Sentinel modes (a REDIS_URL carries its own); secrets.
  REDIS_USERNAME: z.string().optional(),
  REDIS_PASSWORD: z.string().optional(),
  REDIS_SENTINEL_PASSWORD: z.string().optional(),
  REDIS_TLS: boolField('REDIS_TLS'),
  REDIS_TLS_CA: z.string().optional(),
  // How long a permit or a finished attempt waits for a replica's acknowledgement (WAIT 1); 0 turns it off.
  REDIS_WAIT_TIMEOUT: durationField('REDIS_WAIT_TIMEOUT', '1s', true),
  QUEUE_PREFIX: z
    .string()
    .default('ltx')
    .refine((p) => /^[A-Za-z0-9_.-]{1,32}$/.test(p), {
      error: (iss) =>
        `QUEUE_PREFIX: expected 1-32 letters, digits, _ . or -, got ${shown(String(iss.input))}`,
    }),
  LEARNER_API_BASE_URL: urlField('LEARNER_API_BASE_URL', ['http:', 'https:']).optional(),
  USER_AGENT: z
    .string()
    .default(DEFAULT_USER_AGENT)
    .refine((ua) => ua.trim().length > 0 && !/[\r\n]/.test(ua), {
      error: 'USER_AGENT: expected one line of text that names the calling company (the spec requires it)',
    }),
  LEARNER_API_TOKENS: tokensField,
  // The tokens as a file of ORG:TOKEN lines (core/token-file.ts), instead of LEARNER_API_TOKENS.
  LEARNER_API_TOKENS_FILE: pathField(TOKENS_FILE_VAR).optional(),
  // How often `work` reads LEARNER_API_TOKENS_FILE again: a mounted Kubernetes Secret changes with no signal.
  TOKENS_RELOAD_INTERVAL: durationField('TOKENS_RELOAD_INTERVAL', '30s', true),
  LIMIT_PER_TOKEN: rateField('LIMIT_PER_TOKEN', '100/1h'),
  LIMIT_PER_ORG: rateField('LIMIT_PER_ORG', '1000/1d'),
  LIMIT_BURST: z
    .string()
    .default(DEFAULT_BURST)
    .transform((text, ctx) => {
      const burst = parseBurst(text);
      if (!burst) {
        ctx.addIssue({ code: 'custom', message: burstMessage('LIMIT_BURST', text) });
        return z.NEVER;
      }
      return burst;
    }),
  REQUEST_TIMEOUT: durationField('REQUEST_TIMEOUT', '30s'),
  CONNECT_TIMEOUT: durationField('CONNECT_TIMEOUT', '10s'),
  CONCURRENCY: intField('CONCURRENCY', 10, 1, 1000),
  ATTEMPTS: intField('ATTEMPTS', 5, 1, 100),
  BACKOFF: durationField('BACKOFF', '30s'),
  SPOOL_DIR: z
    .string()
    .default('spool')
    .refine((d) => d.trim().length > 0 && !/[\0\r\n]/.test(d), {
      error: (iss) => `SPOOL_DIR: expected a directory path, got ${shown(String(iss.input))}`,
    }),
  SCHEDULE_DIR: z
    .string()
    .refine((d) => d.trim().length > 0 && !/[\0\r\n]/.test(d), {
      error: (iss) => `SCHEDULE_DIR: expected a directory path, got ${shown(String(iss.input))}`,
    })
    .optional(),
  LEASE_GRACE: durationField('LEASE_GRACE', '15s'),
  REPAIR_INTERVAL: durationField('REPAIR_INTERVAL', '10m'),
  RUN_RETENTION: durationField('RUN_RETENTION', '90d', true),
  DRIFT_REPORT_DIR: z
    .string()
    .refine((d) => d.trim().length > 0 && !/[\0\r\n]/.test(d), {
      error: (iss) => `DRIFT_REPORT_DIR: expected a directory path, got ${shown(String(iss.input))}`,
    })
    .optional(),
  REDIS_MAX_CONNECTIONS: intField('REDIS_MAX_CONNECTIONS', 32, 4, 10_000),
  CRAWL_MAX_PAGES: intField('CRAWL_MAX_PAGES', DEFAULT_CRAWL_MAX_PAGES, 1, 10_000_000),
  REDIS_CONNECT_TIMEOUT: z
    .string()
    .optional()
    .transform((text, ctx) => {
      if (text === undefined) return undefined;
      const ms = parseDuration(text);
      if (ms === undefined) {
        ctx.addIssue({
          code: 'custom',
          message: `REDIS_CONNECT_TIMEOUT: expected a duration like 60s or 2m (units ms, s, m, h, d), got ${shown(text)}`,
        });
        return z.NEVER;
      }
      return ms;
    }),
  REDIS_HIGH_WATER: z
    .string()
    .default('90%')
    .transform((text, ctx) => {
      const ratio = parseHighWater(text);
      if (ratio === undefined) {
        ctx.addIssue({
          code: 'custom',
          message: `REDIS_HIGH_WATER: expected a share of maxmemory like 90% or 0.9 (from 1% to 100%), got ${shown(text)}`,
        });
        return z.NEVER;
      }
      return ratio;
    }),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  LOG_FORMAT: z
    .string()
    .default('auto')
    .transform((text, ctx) => {
      const format = text.trim().toLowerCase() as LogFormatSetting;
      if (!LOG_FORMATS.includes(format)) {
        ctx.addIssue({
          code: 'custom',
          message: `LOG_FORMAT: expected auto (text at a terminal, JSON otherwise), json or text, got ${shown(text)}`,
        });
        return z.NEVER;
      }
      return format;
    }),
  // Secrets: the message never echoes the value, only what is expected. The viewer's token has the
  // operator's rules (it reads every page, so it is as worth guessing).
  DASHBOARD_TOKEN: dashboardTokenField('DASHBOARD_TOKEN'),
  DASHBOARD_READ_TOKEN: dashboardTokenField('DASHBOARD_READ_TOKEN'),
  // Paths of a PEM certificate (chain) and its private key: set both and the dashboard serves HTTPS.
  DASHBOARD_TLS_CERT: z.string().optional(),
  DASHBOARD_TLS_KEY: z.string().optional(),
  AUDIT_ARCHIVE_DIR: z
    .string()
    .refine((d) => d.trim().length > 0 && !/[\0\r\n]/.test(d), {
      error: (iss) => `AUDIT_ARCHIVE_DIR: expected a directory path, got ${shown(String(iss.input))}`,
    })
    .optional(),
  AUDIT_ARCHIVE_INTERVAL: durationField('AUDIT_ARCHIVE_INTERVAL', '5m'),
  AUDIT_PERSONAL_RETENTION: durationField('AUDIT_PERSONAL_RETENTION', '0', true),
  // Paths of PEM files for the Learner API: a private CA to trust, and a client certificate with its key
  // (mutual TLS; set both or neither). Read once at start (core/egress.ts), through a proxy too.
  LEARNER_API_TLS_CA: pathField('LEARNER_API_TLS_CA').optional(),
  LEARNER_API_TLS_CERT: pathField('LEARNER_API_TLS_CERT').optional(),
  LEARNER_API_TLS_KEY: pathField('LEARNER_API_TLS_KEY').optional(),
  // A secret as a whole (a Slack or Teams webhook's path is its key): the message never shows the value.
  NOTIFY_WEBHOOK_URL: z
    .string()
    .refine((text) => /^https?:$/.test(urlProtocol(text)) && !/\s/.test(text), {
      error:
        'NOTIFY_WEBHOOK_URL: expected an http or https URL, like https://hooks.slack.com/services/... ' +
        '(the value is not shown: it may hold a secret)',
    })
    .optional(),
  NOTIFY_FAILURE_SHARE: z
    .string()
    .default('10%')
    .transform((text, ctx) => {
      const ratio = parseHighWater(text);
      if (ratio === undefined) {
        ctx.addIssue({
          code: 'custom',
          message: `NOTIFY_FAILURE_SHARE: expected a share of a run's finished learners like 10% or 0.1 (from 1% to 100%), got ${shown(text)}`,
        });
        return z.NEVER;
      }
      return ratio;
    }),
  NOTIFY_BLOCKED_AFTER: durationField('NOTIFY_BLOCKED_AFTER', '30m', true),
  HALT_AT: z
    .string()
    .default(`${DEFAULT_HALT_AT}%`)
    .transform((text, ctx) => {
      const at = parseHaltAt(text);
      if (at === undefined) {
        ctx.addIssue({
          code: 'custom',
          message: `HALT_AT: expected ${HALT_AT_EXPECTED}, got ${shown(text)}`,
        });
        return z.NEVER;
      }
      return at;
    }),
  HALT_SAMPLE: z
    .string()
    .default(String(DEFAULT_HALT_SAMPLE))
    .transform((text, ctx) => {
      const n = parseHaltSample(text);
      if (n === undefined) {
        ctx.addIssue({
          code: 'custom',
          message: `HALT_SAMPLE: expected ${HALT_SAMPLE_EXPECTED}, got ${shown(text)}`,
        });
        return z.NEVER;
      }
      return n;
    }),
  HALT_STORM: z
    .string()
    .default(DEFAULT_HALT_STORM)
    .transform((text, ctx) => {
      const t = text.trim().toLowerCase();
      const ms = t === 'off' || t === '0' ? 0 : parseDuration(t);
      if (ms === undefined) {
        ctx.addIssue({
          code: 'custom',
          message: `HALT_STORM: expected a duration like 30m or 1h (units ms, s, m, h, d), or off, got ${shown(text)}`,
        });
        return z.NEVER;
      }
      return ms;
    }),
  NOTIFY_STALL_AFTER: durationField('NOTIFY_STALL_AFTER', '30m', true),
  // OpenTelemetry's standard variables that turn tracing on (core/tracing-config.ts, docs/tracing.md).
  ...tracingEnvFields,
});

/** A URL's scheme ('' when it does not parse). */
function urlProtocol(text: string): string {
  try {
    return new URL(text).protocol;
  } catch {
    return '';
  }
}

/** Every environment variable the tool reads (the README's configuration table is tested against it). */
export const ENV_VARIABLES: readonly string[] = Object.freeze(Object.keys(envSchema.shape));

export interface LoadOptions {
  /** The base URL may be absent (demo and simulator supply their own). */
  requireBaseUrl?: boolean;
  /** At least one token is needed by commands that call the API. */
  requireTokens?: boolean;
}

/** Parses the environment once. Throws ConfigError naming every bad variable at once. */
/** The variables of the schema that are set: empty strings mean "not set", as in most twelve-factor tools. */
function setVariables(env: Env): Env {
  const cleaned: Env = {};
  for (const key of Object.keys(envSchema.shape)) {
    const v = env[key];
    if (v !== undefined && v !== '') cleaned[key] = v;
  }
  return cleaned;
}

/** The tokens of LEARNER_API_TOKENS or its file; with `requireTokens`, none is a problem. */
function requiredTokens(
  e: z.infer<typeof envSchema>,
  options: LoadOptions,
  problems: string[],
): ReturnType<typeof tokensFrom> {
  const before = problems.length;
  const tokens = tokensFrom(e.LEARNER_API_TOKENS, e.LEARNER_API_TOKENS_FILE, problems);
  // A file that could not be read has said so: "required" would only repeat it.
  if (options.requireTokens && tokens.length === 0 && problems.length === before) {
    problems.push(
      e.LEARNER_API_TOKENS_FILE
        ? `${TOKENS_FILE_VAR} ${e.LEARNER_API_TOKENS_FILE}: no ORG:TOKEN line (one a line, like acme:TOKEN1)`
        : 'LEARNER_API_TOKENS: required, as ORG:TOKEN pairs separated by commas (like acme:TOKEN1,beta:TOKEN2), ' +
            `or ${TOKENS_FILE_VAR}: a file of ORG:TOKEN lines`,
    );
  }
  return tokens;
}

export function loadConfig(env: Env = process.env, options: LoadOptions = {}): Readonly<Config> {
  const set = setVariables(env);
  const parsed = envSchema.safeParse(set);
  const problems: string[] = [];
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      const field = String(issue.path[0] ?? '');
      problems.push(issue.message.startsWith(field) ? issue.message : `${field}: ${issue.message}`);
    }
    throw new ConfigError(problems);
  }
  const e = parsed.data;
  if (options.requireBaseUrl && !e.LEARNER_API_BASE_URL) {
    problems.push(
      'LEARNER_API_BASE_URL: required (the base address of the Learner API, like https://api.example.com)',
    );
  }
  const tokens = requiredTokens(e, options, problems);
  dashboardProblems(e, problems);
  if (e.AUDIT_PERSONAL_RETENTION > 0 && !e.AUDIT_ARCHIVE_DIR)
    problems.push(
      'AUDIT_PERSONAL_RETENTION needs AUDIT_ARCHIVE_DIR: entries are archived before their e-mail addresses ' +
        'and names are removed, and the removal rewrites the archive files (an entry of the Redis stream ' +
        'cannot be edited in place)',
    );
  const redis = redisTargetFrom(e, problems);
  // HTTPS_PROXY and friends are read from `env` as given (both cases): they are not in the schema, since
  // they belong to every tool of the host, not to this one.
  const egress = readEgress(env, e, problems);
  if (problems.length > 0 || !redis) throw new ConfigError(problems);

  const orgs: string[] = [];
  for (const t of tokens) if (!orgs.includes(t.org)) orgs.push(t.org);
  const config: Config = {
    redis,
    redisWaitTimeoutMs: e.REDIS_WAIT_TIMEOUT,
    queuePrefix: e.QUEUE_PREFIX,
    apiBaseUrl: e.LEARNER_API_BASE_URL,
    userAgent: e.USER_AGENT,
    tokens: Object.freeze(tokens),
    orgs: Object.freeze(orgs),
    tokensFile: e.LEARNER_API_TOKENS_FILE,
    tokensReloadMs: e.TOKENS_RELOAD_INTERVAL,
    limitPerToken: Object.freeze(e.LIMIT_PER_TOKEN),
    limitPerOrg: Object.freeze(e.LIMIT_PER_ORG),
    burst: Object.freeze(e.LIMIT_BURST),
    limitVariablesSet: Object.freeze(
      (['LIMIT_PER_TOKEN', 'LIMIT_PER_ORG', 'LIMIT_BURST'] as const).filter((v) => set[v] !== undefined),
    ),
    haltVariablesSet: Object.freeze(
      (['HALT_AT', 'HALT_SAMPLE'] as const).filter((v) => set[v] !== undefined),
    ),
    userAgentSet: set.USER_AGENT !== undefined,
    requestTimeoutMs: e.REQUEST_TIMEOUT,
    connectTimeoutMs: e.CONNECT_TIMEOUT,
    concurrency: e.CONCURRENCY,
    attempts: e.ATTEMPTS,
    backoffMs: e.BACKOFF,
    spoolDir: e.SPOOL_DIR,
    scheduleDir: e.SCHEDULE_DIR,
    leaseGraceMs: e.LEASE_GRACE,
    repairIntervalMs: e.REPAIR_INTERVAL,
    runRetentionMs: e.RUN_RETENTION,
    driftReportDir: e.DRIFT_REPORT_DIR,
    crawlMaxPages: e.CRAWL_MAX_PAGES,
    logLevel: e.LOG_LEVEL,
    logFormat: e.LOG_FORMAT,
    redisConnectTimeoutMs: e.REDIS_CONNECT_TIMEOUT,
    redisHighWater: e.REDIS_HIGH_WATER,
    redisMaxConnections: e.REDIS_MAX_CONNECTIONS,
    dashboardTlsCert: e.DASHBOARD_TLS_CERT,
    dashboardTlsKey: e.DASHBOARD_TLS_KEY,
    auditArchiveDir: e.AUDIT_ARCHIVE_DIR,
    auditArchiveIntervalMs: e.AUDIT_ARCHIVE_INTERVAL,
    auditPersonalRetentionMs: e.AUDIT_PERSONAL_RETENTION,
    ...notifySettings(e),
    tracing: tracingSettings(e),
  } as Omit<Config, 'egress'> as Config;
  return Object.freeze(withHiddenSecrets(config, e, egress));
}

/** Secrets and what holds them, kept out of a JSON dump of the config (a log line, `status --json`). */
function withHiddenSecrets(config: Config, e: z.infer<typeof envSchema>, egress: Egress): Config {
  for (const [key, value] of [
    ['dashboardToken', e.DASHBOARD_TOKEN],
    ['dashboardReadToken', e.DASHBOARD_READ_TOKEN],
    ['egress', Object.freeze(egress)],
    ['notifyWebhookUrl', e.NOTIFY_WEBHOOK_URL],
  ] as const)
    Object.defineProperty(config, key, { value, enumerable: false });
  return config;
}

/** The notifications' thresholds (the webhook URL itself is set apart, non-enumerable). */
function notifySettings(e: z.infer<typeof envSchema>) {
  return {
    notifyFailureShare: e.NOTIFY_FAILURE_SHARE,
    notifyBlockedAfterMs: e.NOTIFY_BLOCKED_AFTER,
    notifyStallAfterMs: e.NOTIFY_STALL_AFTER,
    haltAt: e.HALT_AT,
    haltSample: e.HALT_SAMPLE,
    haltStormMs: e.HALT_STORM,
  };
}

/** The dashboard's TLS files come in pairs; its tokens follow dashboardTokenProblems. */
function dashboardProblems(e: z.infer<typeof envSchema>, problems: string[]): void {
  if (Boolean(e.DASHBOARD_TLS_CERT) !== Boolean(e.DASHBOARD_TLS_KEY)) {
    problems.push(
      'DASHBOARD_TLS_CERT, DASHBOARD_TLS_KEY: set both (paths of the PEM certificate and its key) or neither',
    );
  }
  dashboardTokenProblems(e.DASHBOARD_TOKEN, e.DASHBOARD_READ_TOKEN, problems);
}

/**
 * The viewer token beside the operator's: it needs DASHBOARD_TOKEN (without it the dashboard has no
 * authentication at all, and every local caller may act: a viewer token would protect nothing), and it
 * must differ from it (the same value would make every operator a viewer, or every viewer an operator).
 * The messages never show either value.
 */
function dashboardTokenProblems(
  operator: string | undefined,
  viewer: string | undefined,
  problems: string[],
): void {
  if (viewer === undefined) return;
  if (operator === undefined) {
    problems.push(
      'DASHBOARD_READ_TOKEN: needs DASHBOARD_TOKEN beside it (the operator token); without DASHBOARD_TOKEN the dashboard has no authentication, so a viewer token would protect nothing',
    );
  } else if (operator === viewer) {
    problems.push(
      'DASHBOARD_READ_TOKEN, DASHBOARD_TOKEN: the same value; the viewer token must differ from the operator token (the values are not shown)',
    );
  }
}

/**
 * The tokens of LEARNER_API_TOKENS or of LEARNER_API_TOKENS_FILE. Both set is refused, as the `*_FILE`
 * convention of container images does (the official postgres and mysql images stop on it): an operator
 * who moves the tokens into a file and forgets the variable would otherwise run with tokens they believe
 * removed, and tokens of the variable could not follow the file's reloads.
 */
function tokensFrom(fromEnv: TokenRef[], file: string | undefined, problems: string[]): TokenRef[] {
  if (file === undefined) return fromEnv;
  if (fromEnv.length > 0) {
    problems.push(
      `LEARNER_API_TOKENS, ${TOKENS_FILE_VAR}: both are set; give the tokens in one place ` +
        `(unset LEARNER_API_TOKENS to use ${file})`,
    );
    return [];
  }
  const read = readTokenFile(file);
  if (!read.ok) {
    problems.push(...read.problems);
    return [];
  }
  return read.tokens;
}

export function tokensOf(config: Config, org: string): TokenRef[] {
  return config.tokens.filter((t) => t.org === org);
}

/** Every token secret of a config, for redaction and for tests that prove none leaked. */
export function secretsOf(config: Config): string[] {
  // And the secrets fixed for the process's life (the proxy's password, the webhook URL...): an error
  // may quote any of them, and none may reach a log.
  return [...config.tokens.map((t) => t.secret), ...fixedSecretsOf(config)];
}

/**
 * Secrets fixed for the process's life that every log line is scrubbed of, beside the tokens and
 * DASHBOARD_TOKEN: the proxy's password, the notifications' webhook URL and the dashboard's viewer token.
 */
export function fixedSecretsOf(config: Config): string[] {
  return [
    ...egressSecretsOf(config),
    ...webhookSecrets(config.notifyWebhookUrl),
    ...(config.dashboardReadToken ? [config.dashboardReadToken] : []),
  ];
}

/** The passwords of the proxy URLs the config uses, as written and decoded (core/egress.ts). */
export function egressSecretsOf(config: Config): string[] {
  return proxySecrets({ HTTP_PROXY: config.egress?.httpProxy, HTTPS_PROXY: config.egress?.httpsProxy });
}
