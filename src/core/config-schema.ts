// The environment's schema: every variable the tool reads, its default and its parser.
// loadConfig (config.ts) parses it once, at the edge.
import * as z from 'zod';
import { burstMessage, DEFAULT_BURST, parseBurst } from './burst.ts';
import {
  boolField,
  dashboardTokenField,
  durationField,
  intField,
  parseHighWater,
  pathField,
  rateField,
  REDIS_URL_FORM,
  shown,
  tokensField,
  urlField,
  urlProtocol,
} from './config-fields.ts';
import { parseDuration } from './duration.ts';
import { LOG_FORMATS, type LogFormatSetting } from './log-text.ts';
import { TOKENS_FILE_VAR } from './token-file.ts';
import { tracingEnvFields } from './tracing-config.ts';
import {
  DEFAULT_HALT_AT,
  DEFAULT_HALT_SAMPLE,
  DEFAULT_HALT_STORM,
  HALT_AT_EXPECTED,
  HALT_SAMPLE_EXPECTED,
  parseHaltAt,
  parseHaltSample,
} from './halt-rule.ts';

export const DEFAULT_USER_AGENT = 'learner-transfer/0.1 (bulk learner transfer worker)';

/** CRAWL_MAX_PAGES by default: 1,000,000 learners at the spec's 100 a page. */
export const DEFAULT_CRAWL_MAX_PAGES = 10_000;

export const envSchema = z.object({
  REDIS_URL: urlField('REDIS_URL', ['redis:', 'rediss:'], REDIS_URL_FORM).default('redis://127.0.0.1:6379'),
  // Redis Cluster (seed nodes) or Sentinel: either replaces REDIS_URL (core/redis-target.ts).
  REDIS_CLUSTER_NODES: z.string().optional(),
  REDIS_SENTINELS: z.string().optional(),
  REDIS_SENTINEL_MASTER: z.string().optional(),
  // Credentials of the data nodes in cluster and Sentinel modes; secrets.
  REDIS_USERNAME: z.string().optional(),
  REDIS_PASSWORD: z.string().optional(),
  REDIS_SENTINEL_PASSWORD: z.string().optional(),
  REDIS_TLS: boolField('REDIS_TLS'),
  REDIS_TLS_CA: z.string().optional(),
  // How long a permit or a finished attempt waits for a replica (WAIT 1); 0 turns it off.
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
  // How often `work` reads the token file again: a mounted Secret changes with no signal.
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
  // A PEM certificate (chain) and its private key: with both, the dashboard serves HTTPS.
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
  // PEM files for the Learner API: a private CA, a client certificate and its key (both or
  // neither).
  LEARNER_API_TLS_CA: pathField('LEARNER_API_TLS_CA').optional(),
  LEARNER_API_TLS_CERT: pathField('LEARNER_API_TLS_CERT').optional(),
  LEARNER_API_TLS_KEY: pathField('LEARNER_API_TLS_KEY').optional(),
  // A secret as a whole (a webhook's path is its key): the message never shows the value.
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
  // OpenTelemetry's standard variables that turn tracing on (docs/tracing.md).
  ...tracingEnvFields,
});

/** Every environment variable the tool reads (the README's table is tested against it). */
export const ENV_VARIABLES: readonly string[] = Object.freeze(Object.keys(envSchema.shape));

export type EnvValues = z.infer<typeof envSchema>;
