// The environment into a frozen Config, once, at the edge. Every error names the variable, the
// expected form and the bad value (never a token's). Shape: config-type.ts; schema:
// config-schema.ts.
import * as z from 'zod';
import { dashboardProblems } from './config-dashboard.ts';
import { envSchema, type EnvValues } from './config-schema.ts';
import { withHiddenSecrets } from './config-secrets.ts';
import type { Config, Env } from './config-type.ts';
import { readEgress } from './egress.ts';
import { ConfigError } from './errors.ts';
import { redisTargetFrom } from './redis-target.ts';
import { readTokenFile, TOKENS_FILE_VAR } from './token-file.ts';
import type { TokenRef } from './token-ref.ts';
import { tracingSettings } from './tracing-config.ts';

export { tokenFingerprint, type TokenRef } from './token-ref.ts';
export type { Config, Env } from './config-type.ts';
export {
  isWeakToken,
  maskUrlPassword,
  MIN_DISTINCT_TOKEN_CHARS,
  parseHighWater,
  REDIS_URL_FORM,
} from './config-fields.ts';
export { DEFAULT_CRAWL_MAX_PAGES, DEFAULT_USER_AGENT, ENV_VARIABLES } from './config-schema.ts';
export { egressSecretsOf, fixedSecretsOf, secretsOf } from './config-secrets.ts';

export interface LoadOptions {
  /** The base URL may be absent (demo and simulator supply their own). */
  requireBaseUrl?: boolean;
  /** At least one token is needed by commands that call the API. */
  requireTokens?: boolean;
}

/** Parses the environment once. Throws ConfigError naming every bad variable at once. */
/** The variables of the schema that are set: an empty string is "not set". */
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
  // HTTPS_PROXY and friends are read from `env` as given: they belong to every tool of the
  // host.
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

/** The notifications' thresholds (the webhook URL itself is set apart, non-enumerable). */
function notifySettings(e: EnvValues) {
  return {
    notifyFailureShare: e.NOTIFY_FAILURE_SHARE,
    notifyBlockedAfterMs: e.NOTIFY_BLOCKED_AFTER,
    notifyStallAfterMs: e.NOTIFY_STALL_AFTER,
    haltAt: e.HALT_AT,
    haltSample: e.HALT_SAMPLE,
    haltStormMs: e.HALT_STORM,
  };
}

/**
 * The tokens of LEARNER_API_TOKENS or of LEARNER_API_TOKENS_FILE; both set is refused
 * (docs/configuration.md).
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
