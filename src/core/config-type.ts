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
