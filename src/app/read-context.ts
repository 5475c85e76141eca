// The light half of the context (context.ts): Redis and what works through it alone, without
// BullMQ, undici or OpenTelemetry, so status, limits and changes answer fast
// (test/integration/cli-status-loads.test.ts holds them to it).
import type { RedisClient } from '../redis/client.ts';
import { fixedSecretsOf, type Config } from '../core/config.ts';
import { TokenBook } from '../core/token-book.ts';
import { createKeys, type Keys } from '../core/keys.ts';
import { inflightTtlFor, TransferBudget } from '../limiter/index.ts';
import { createLogger, type Logger } from '../core/log.ts';
import type { LogFormat, TextLogOptions } from '../core/log-text.ts';
import type { DestinationStream } from 'pino';
import { OutcomeStore } from '../outcomes/store.ts';
import { Runs } from '../outcomes/runs.ts';
import { closeRedis, connectRedis } from '../redis/client.ts';
import { checkRedisPermissions } from '../redis/acl-check.ts';
import { LearnerTransferError } from '../core/errors.ts';
import { Claims } from '../claims/claims.ts';
import { upgradeState } from './state-upgrade.ts';
import { Durability } from '../redis/durability.ts';
import { LogThrottle } from '../core/log-throttle.ts';
import { malformedPolicyError, seedPolicies, warnIfLimitsDiffer } from '../limiter/policy.ts';

export interface ReadContext {
  config: Readonly<Config>;
  /** The tokens in force; `work` reloads them (app/token-reload.ts), so ask this, not the config. */
  tokens: TokenBook;
  logger: Logger;
  redis: RedisClient;
  keys: Keys;
  store: OutcomeStore;
  runs: Runs;
  claims: Claims;
  budget: TransferBudget;
  /** WAIT for a replica after the writes that must survive a failover (REDIS_WAIT_TIMEOUT). */
  durability: Durability;
  close(): Promise<void>;
}

/** What a caller may give instead of what createReadContext makes from the config. */
export interface ReadContextOptions {
  logger?: Logger;
  redis?: RedisClient;
  redisTimeoutMs?: number;
  /** CLIENT SETNAME of the connection made here (`work` adds its pid). */
  connectionName?: string;
  /** Where the logger built here writes (default: stderr). */
  logDestination?: DestinationStream | undefined;
  /** How the logger built here writes: JSON lines (default) or plain sentences (LOG_FORMAT). */
  logFormat?: LogFormat;
  /** With logFormat text: lines to leave out (work's progress line says them). */
  logText?: TextLogOptions;
}

/** The token book, the logger and the Redis connection, its ACL rules checked (exit 7). */
export async function openRedisContext(
  config: Readonly<Config>,
  options: ReadContextOptions,
): Promise<{ tokens: TokenBook; logger: Logger; redis: RedisClient; ownsRedis: boolean }> {
  // The logger scrubs the book's secrets; the book reports failing listeners to it (after start).
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
  // A missing ACL rule stops here, named, not on first use.
  await checkRedisPermissions(redis, config.redis, config.queuePrefix, config.orgs).catch(
    async (err: unknown) => {
      if (!options.redis) await closeRedis(redis);
      throw err;
    },
  );
  return { tokens, logger, redis, ownsRedis: !options.redis };
}

/** The pieces that work through the connection alone, and the throttles and state they share. */
export function readParts(
  config: Readonly<Config>,
  { logger, redis }: { logger: Logger; redis: RedisClient },
) {
  const keys = createKeys(config.queuePrefix);
  const store = new OutcomeStore(redis, keys);
  const runs = new Runs(redis, keys);
  const claims = new Claims(redis, keys);
  // Decision 10: limits are seeded from LIMIT_* on an organization's first acquire, then read from
  // Redis; a process whose LIMIT_* differ says so, once.
  const limitsWarned = new Set<string>();
  // A malformed stored limit is ignored; logged at once, then once a minute with a count.
  const policyErrors = new LogThrottle(logger, { intervalMs: 60_000 });
  const budget = createBudget(redis, keys, config, logger, limitsWarned, policyErrors);
  const durability = new Durability(redis, config.redisWaitTimeoutMs, logger);
  return { keys, store, runs, claims, budget, durability, limitsWarned, policyErrors };
}

/** The checks at start that read Redis: state upgrade, then LIMIT_* against those stored. */
export async function startState(
  config: Readonly<Config>,
  {
    redis,
    keys,
    logger,
    limitsWarned,
  }: { redis: RedisClient; keys: Keys; logger: Logger; limitsWarned: Set<string> },
): Promise<void> {
  // An earlier release's state is brought to this layout once (claims from records).
  await upgradeState({ redis, keys, logger, orgs: config.orgs });
  // Read-only: a command whose LIMIT_* differ from the limits in Redis says so.
  await warnIfLimitsDiffer(redis, keys, config.orgs, config, logger, limitsWarned);
}

/** A context of an opened connection and its parts; its close() stops what they started. */
export function readContextOf(
  config: Readonly<Config>,
  opened: Awaited<ReturnType<typeof openRedisContext>>,
  parts: ReturnType<typeof readParts>,
): ReadContext {
  const { limitsWarned: _limitsWarned, policyErrors, ...shared } = parts;
  const { tokens, logger, redis, ownsRedis } = opened;
  return {
    config,
    tokens,
    logger,
    redis,
    ...shared,
    async close() {
      policyErrors.stop();
      shared.durability.stop();
      if (ownsRedis) await closeRedis(redis);
    },
  };
}

/** The checks at start (startState); a failed one closes what the context opened before it throws. */
export async function startOrClose(context: { close(): Promise<void> }, start: Promise<void>): Promise<void> {
  await start.catch(async (err: unknown) => {
    await context.close();
    throw err;
  });
}

/** The light context of the read-only commands: no queues, API client or tracing. */
export async function createReadContext(
  config: Readonly<Config>,
  options: ReadContextOptions = {},
): Promise<ReadContext> {
  const opened = await openRedisContext(config, options);
  const parts = readParts(config, opened);
  const context = readContextOf(config, opened, parts);
  await startOrClose(context, startState(config, { ...opened, ...parts }));
  return context;
}

/**
 * Every secret to scrub (the book's tokens, removed ones too, the dashboard's token, `more`): one
 * array until the book changes, so the logger derives the forms once per change, not per line.
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
