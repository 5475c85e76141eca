// The pieces a command needs, built once from a Config: one Redis connection, keys, store,
// queues, producer, limiter, and the API client.
import type { RedisClient } from '../redis/client.ts';
import { LearnerApiClient } from '../api/client.ts';
import { fixedSecretsOf, type Config } from '../core/config.ts';
import { describeEgress, egressIsSet } from '../core/egress.ts';
import { TokenBook } from '../core/token-book.ts';
import { createKeys, type Keys } from '../core/keys.ts';
import { inflightTtlFor, TransferBudget } from '../limiter/index.ts';
import { createLogger, type Logger } from '../core/log.ts';
import type { LogFormat, TextLogOptions } from '../core/log-text.ts';
import type { DestinationStream } from 'pino';
import { OutcomeStore } from '../outcomes/store.ts';
import { Runs } from '../outcomes/runs.ts';
import { Producer } from '../queue/producer.ts';
import { QueueSet } from '../queue/queues.ts';
import { closeRedis, connectRedis } from '../redis/client.ts';
import { checkRedisPermissions } from '../redis/acl-check.ts';
import { LearnerTransferError } from '../core/errors.ts';
import { Claims } from '../claims/claims.ts';
import { upgradeState } from './state-upgrade.ts';
import { Durability } from '../redis/durability.ts';
import { LogThrottle } from '../core/log-throttle.ts';
import { malformedPolicyError, seedPolicies, warnIfLimitsDiffer } from '../limiter/policy.ts';
import type { SpanExporter } from '@opentelemetry/sdk-trace-node';
import { startTracing } from '../core/tracing-start.ts';

export interface AppContext {
  config: Readonly<Config>;
  /**
   * The tokens in force, replaced by `work` when the token file changes: ask this, not the
   * config.
   */
  tokens: TokenBook;
  logger: Logger;
  redis: RedisClient;
  keys: Keys;
  store: OutcomeStore;
  runs: Runs;
  queues: QueueSet;
  producer: Producer;
  claims: Claims;
  budget: TransferBudget;
  /** WAIT for a replica after the writes that must survive a failover (REDIS_WAIT_TIMEOUT). */
  durability: Durability;
  /** Present when the config has a base URL. */
  client: LearnerApiClient | undefined;
  close(): Promise<void>;
}

/** What a caller may give createContext instead of what it makes from the config. */
export interface ContextOptions {
  logger?: Logger;
  redis?: RedisClient;
  redisTimeoutMs?: number;
  /** CLIENT SETNAME of the connection made here (`work` adds its pid). */
  connectionName?: string;
  /** Where the logger built here writes (default: stderr). */
  logDestination?: DestinationStream | undefined;
  /** How the logger built here writes: JSON lines (default) or plain sentences (LOG_FORMAT). */
  logFormat?: LogFormat;
  /** With logFormat text: lines to leave out. */
  logText?: TextLogOptions;
  /** Where spans go instead of the configured exporters (a test's): tracing on. */
  traceExporter?: SpanExporter;
}

export async function createContext(
  config: Readonly<Config>,
  options: ContextOptions = {},
): Promise<AppContext> {
  // The logger scrubs the book's secrets; the book reports a failing listener to the logger.
  const tokens = new TokenBook(config.tokens, {
    onListenerError: (err) =>
      logger.error({ err: (err as Error)?.message ?? String(err) }, 'a listener of the token changes failed'),
  });
  const logger =
    options.logger ??
    createLogger({
      level: config.logLevel,
      ...(options.logDestination ? { destination: options.logDestination } : {}),
      ...(options.logFormat ? { format: options.logFormat } : {}),
      ...(options.logText ? { text: options.logText } : {}),
      secrets: liveSecrets(tokens, config.dashboardToken, fixedSecretsOf(config)),
    });
  const redis =
    options.redis ??
    (await connectRedis(config.redis, {
      logger,
      timeoutMs: options.redisTimeoutMs ?? config.redisConnectTimeoutMs,
      ...(options.connectionName ? { name: options.connectionName } : {}),
    }));
  // A user without a rule the tool needs stops here, naming the rule (exit 7).
  await checkRedisPermissions(redis, config.redis, config.queuePrefix, config.orgs).catch(
    async (err: unknown) => {
      if (!options.redis) await closeRedis(redis);
      throw err;
    },
  );
  // Before the queues: BullMQ's telemetry is fixed when a Queue is made.
  const tracing = await startTracing(config.tracing, options.traceExporter);
  const keys = createKeys(config.queuePrefix);
  const store = new OutcomeStore(redis, keys);
  const runs = new Runs(redis, keys);
  // A Redis refusing writes makes every queue say so on every call: one line per interval.
  const queueErrors = new LogThrottle(logger);
  const queues = new QueueSet(redis, keys, config, (org, err) =>
    queueErrors.warn({ org, err: err.message }, 'queue redis connection error'),
  );
  const claims = new Claims(redis, keys);
  const producer = new Producer(queues, store, claims, keys);
  // The fleet's limits live in Redis (decision 10): seeded from LIMIT_* at an organization's
  // first acquire; differing LIMIT_* are said once.
  const limitsWarned = new Set<string>();
  // A malformed stored limit is ignored by every acquire: logged at once, then once a minute
  // with a count.
  const policyErrors = new LogThrottle(logger, { intervalMs: 60_000 });
  const budget = createBudget(redis, keys, config, logger, limitsWarned, policyErrors);
  const client = config.apiBaseUrl ? createApiClient(config, config.apiBaseUrl, logger) : undefined;
  const ownsRedis = !options.redis;
  const durability = new Durability(redis, config.redisWaitTimeoutMs, logger);
  // State of an earlier release is brought up to this one's layout once.
  await upgradeState({ redis, keys, logger, orgs: config.orgs });
  // Read-only: a command whose LIMIT_* differ from the limits in Redis says so.
  await warnIfLimitsDiffer(redis, keys, config.orgs, config, logger, limitsWarned);
  return {
    config,
    tokens,
    logger,
    redis,
    keys,
    store,
    runs,
    queues,
    producer,
    claims,
    budget,
    durability,
    client,
    async close() {
      await queues.close();
      queueErrors.stop();
      policyErrors.stop();
      durability.stop();
      await client?.close();
      if (ownsRedis) await closeRedis(redis);
      await tracing.stop(); // last: the spans of the closing above are exported too
    },
  };
}

/**
 * Every token secret of the book (removed ones too), the dashboard's token and `more`: one
 * array until the book changes, so the logger works out the forms once per change.
 */
export function liveSecrets(
  tokens: TokenBook,
  dashboardToken: string | undefined,
  /** Secrets fixed for the process's life: the proxy URL's password. */
  fixed: readonly string[] = [],
): () => readonly string[] {
  let version = -1;
  let all: readonly string[] = [];
  return () => {
    if (tokens.version !== version) {
      version = tokens.version;
      all = [...tokens.secrets(), ...(dashboardToken ? [dashboardToken] : []), ...fixed];
    }
    return all;
  };
}

/** The budget every acquire goes through; a malformed stored limit is logged, throttled. */
function createBudget(
  redis: RedisClient,
  keys: Keys,
  config: Readonly<Config>,
  logger: Logger,
  limitsWarned: Set<string>,
  policyErrors: LogThrottle,
): TransferBudget {
  return new TransferBudget(redis, {
    prefix: config.queuePrefix,
    limitPerToken: config.limitPerToken,
    limitPerOrg: config.limitPerOrg,
    burst: config.burst,
    inflightTtlMs: inflightTtlFor(config.requestTimeoutMs),
    halt: { haltAt: config.haltAt, haltSample: config.haltSample, haltStormMs: config.haltStormMs },
    seed: (org) => seedPolicies(redis, keys, [org], config, logger, limitsWarned),
    onMalformedPolicy: (org, fields) => {
      for (const { field, value } of fields) {
        const e = malformedPolicyError(org, field, value, config);
        policyErrors.error(e.fields, e.msg, `${org}\u0000${field}\u0000${value}`);
      }
    },
  });
}

/** What a process that calls the service without USER_AGENT says, once. */
export function userAgentUnset(sent: string): string {
  return (
    `USER_AGENT is not set: the Learner API is sent this tool's generic User-Agent '${sent}', which names ` +
    'no company. The spec requires a User-Agent that identifies the calling company (so the service can tell ' +
    'whose traffic this is, and whom to ask about it): set USER_AGENT, like ' +
    'USER_AGENT="Acme Corp learner migration (ops@acme.example)"'
  );
}

/** The Learner API client: a stall of this process is logged as such. */
function createApiClient(config: Readonly<Config>, baseUrl: string, logger: Logger): LearnerApiClient {
  // Once per process: the way out to the service, when it is not the plain direct one.
  if (config.egress && egressIsSet(config.egress)) {
    logger.info({ egress: describeEgress(baseUrl, config.egress) }, 'learner api egress');
  }
  return new LearnerApiClient({
    baseUrl,
    egress: config.egress,
    userAgent: config.userAgent,
    requestTimeoutMs: config.requestTimeoutMs,
    connectTimeoutMs: config.connectTimeoutMs,
    // Once, at the first call of the service: a command that never calls it says nothing.
    onFirstCall:
      config.userAgentSet === false
        ? () => logger.warn({ userAgent: config.userAgent }, userAgentUnset(config.userAgent))
        : undefined,
    onStall: (stalledMs) =>
      logger.warn(
        { stalledMs },
        `this process was stalled for ${(stalledMs / 1000).toFixed(1)} s (a VM pause, a long GC pause or SIGSTOP), ` +
          'not the service being slow: the calls in flight read the answers that arrived meanwhile before their timeouts decided',
      ),
  });
}

/** Checks that an org key from a flag has a token; the message lists the ones that do. */
export function requireOrg(config: Readonly<Config>, org: string, flag = '--org'): string {
  if (!config.orgs.includes(org)) {
    throw new LearnerTransferError(
      'LT_UNKNOWN_ORG',
      `${flag} '${org}' has no token in ${config.tokensFile ? `LEARNER_API_TOKENS_FILE ${config.tokensFile}` : 'LEARNER_API_TOKENS'} ` +
        `(organizations with tokens: ${config.orgs.join(', ') || 'none'})`,
    );
  }
  return org;
}
