// The Config a command runs with, as loadConfig (config.ts) builds it from the environment.
import type { Burst } from './burst.ts';
import type { Rate } from './duration.ts';
import type { Egress } from './egress.ts';
import type { HaltAt } from './halt-rule.ts';
import type { LogFormatSetting } from './log-text.ts';
import type { RedisTarget } from './redis-target.ts';
import type { TokenRef } from './token-ref.ts';
import type { TracingSettings } from './tracing-config.ts';

export interface Config {
  /** REDIS_URL, REDIS_CLUSTER_NODES, or REDIS_SENTINELS + REDIS_SENTINEL_MASTER. */
  redis: RedisTarget;
  queuePrefix: string;
  apiBaseUrl: string | undefined;
  userAgent: string;
  /** The tokens at start; `work` follows a token file's changes in ctx.tokens. */
  tokens: readonly TokenRef[];
  /** Organization keys in the order they first appear in LEARNER_API_TOKENS (or its file). */
  orgs: readonly string[];
  /** LEARNER_API_TOKENS_FILE: where the tokens were read from. */
  tokensFile: string | undefined;
  /** TOKENS_RELOAD_INTERVAL: how often `work` reads the token file again (0: only on SIGHUP). */
  tokensReloadMs: number;
  limitPerToken: Rate;
  limitPerOrg: Rate;
  /** LIMIT_BURST: the pacing buckets' size where the stored policy has none (core/burst.ts). */
  burst: Burst;
  /** The LIMIT_* the environment sets (the others are built-in defaults, and nobody's setting). */
  limitVariablesSet?: readonly ('LIMIT_PER_TOKEN' | 'LIMIT_PER_ORG' | 'LIMIT_BURST')[];
  /** USER_AGENT is set (unset, the generic DEFAULT_USER_AGENT is sent). */
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
  /** LEASE_GRACE: how long another worker's expired lease is contested before it is taken. */
  leaseGraceMs: number;
  /** REPAIR_INTERVAL: how often `work` looks for learners left without a job. */
  repairIntervalMs: number;
  /** RUN_RETENTION: runs older than this are compacted by `work`; 0 keeps every run whole. */
  runRetentionMs: number;
  /** DRIFT_REPORT_DIR: where a reconcile that found drift writes its report (unset: out/). */
  driftReportDir: string | undefined;
  /** CRAWL_MAX_PAGES: a service that claims more pages than this stops the walk with an error. */
  crawlMaxPages: number;
  /** REDIS_CONNECT_TIMEOUT: how long to wait for Redis at start; unset: the command's default. */
  redisConnectTimeoutMs: number | undefined;
  /** REDIS_WAIT_TIMEOUT: how long a durable write waits for a replica (0: no WAIT). */
  redisWaitTimeoutMs: number;
  /** REDIS_HIGH_WATER: share of Redis's maxmemory above which workers hold back (0 < ratio <= 1). */
  redisHighWater: number;
  /** REDIS_MAX_CONNECTIONS: the most Redis connections a `work` process holds. */
  redisMaxConnections: number;
  /** Password of the dashboard (Bearer or HTTP basic). Non-enumerable, as token secrets. */
  readonly dashboardToken?: string | undefined;
  /** DASHBOARD_READ_TOKEN: the viewer's password (every page, no action); needs DASHBOARD_TOKEN. */
  readonly dashboardReadToken?: string | undefined;
  dashboardTlsCert?: string | undefined;
  dashboardTlsKey?: string | undefined;
  /** AUDIT_ARCHIVE_DIR: where `work` archives the audit stream, then trims it. */
  auditArchiveDir?: string | undefined;
  /** AUDIT_ARCHIVE_INTERVAL: how often `work` archives (and at its graceful stop). */
  auditArchiveIntervalMs: number;
  /** AUDIT_PERSONAL_RETENTION: past it, names and e-mails leave audit entries (0: kept). */
  auditPersonalRetentionMs: number;
  /** The proxy and TLS material for the Learner API (egress.ts); non-enumerable. */
  readonly egress: Egress;
  /** NOTIFY_WEBHOOK_URL: where `work` posts notifications. A secret: non-enumerable. */
  readonly notifyWebhookUrl?: string | undefined;
  /** NOTIFY_FAILURE_SHARE: a run failing above this share is said (0 < r <= 1). */
  notifyFailureShare: number;
  /** NOTIFY_BLOCKED_AFTER: an organization paused or blocked this long is said (0: never). */
  notifyBlockedAfterMs: number;
  /** NOTIFY_STALL_AFTER: learners due this long that no worker took are said (0: never). */
  notifyStallAfterMs: number;
  /** HALT_AT: the share of failures in the sample that halts an organization (percent), or 'off'. */
  haltAt: HaltAt;
  /** HALT_SAMPLE: how many of an organization's last final outcomes the error budget judges. */
  haltSample: number;
  /** The HALT_* the environment sets (the others are built-in defaults). */
  haltVariablesSet?: readonly ('HALT_AT' | 'HALT_SAMPLE')[];
  /** HALT_STORM: how long a 5xx storm may last before it halts the organization (ms; 0: never). */
  haltStormMs: number;
  /** OTEL_EXPORTER_OTLP_ENDPOINT / _TRACES_EXPORTER / _SERVICE_NAME: tracing on; undefined: off. */
  tracing: TracingSettings | undefined;
}

export type Env = Record<string, string | undefined>;
