import { requireOrg, type AppContext } from '../app/context.ts';
import { startWorkers, type WorkResult } from '../worker/run-workers.ts';
import { haltShareOf } from '../ops/actions/canary.ts';
import { EXIT, LearnerTransferError } from '../core/errors.ts';
import type { Config } from '../core/config.ts';
import type * as Prometheus from '../ops/metrics/prometheus.ts';
import type * as WorkMetrics from '../ops/metrics/work-metrics.ts';
import { bindTokens } from '../limiter/token-orgs.ts';
import { TOKENS_FILE_VAR } from '../core/token-file.ts';
import type { TokenReloader } from '../app/token-reload.ts';
import { isLoopbackAddress } from '../core/http-access.ts';
import type { Cli } from './io.ts';
import type { AuditArchiver } from '../ops/audit/archive.ts';
import { isLearnerInfo } from '../core/log-text.ts';
import { BodyArchive } from '../worker/body-archive.ts';
import { progressTarget, WorkProgress } from './work-progress.ts';
import { jobSettingsWarning } from './work-settings.ts';
import { contextReadiness, workerReadiness } from '../ops/metrics/health.ts';
import type { WriteState } from '../redis/writes.ts';
import type { Notifier } from '../ops/notify/notifier.ts';

export interface WorkFlags {
  concurrency?: number;
  org?: string[];
  untilIdle?: boolean;
  metricsPort?: number;
  metricsHost: string;
  control?: boolean;
}

/** Metrics name organizations and runs: beyond loopback only with the dashboard's token. */
function checkMetricsHost(opts: WorkFlags, dashboardToken: string | undefined): boolean {
  const metricsOpen = isLoopbackAddress(opts.metricsHost);
  if (opts.metricsPort && !metricsOpen && !dashboardToken) {
    throw new LearnerTransferError(
      'LT_USAGE',
      `--metrics-host ${opts.metricsHost} is not a loopback address: set DASHBOARD_TOKEN (16 or more ` +
        `characters) so that /metrics asks for it (Authorization: Bearer), or keep the default 127.0.0.1`,
    );
  }
  return metricsOpen;
}

/**
 * The /metrics server of --metrics-port (with /healthz and /readyz), or nothing; the context is
 * closed when it cannot listen. prom-client loads only here.
 */
async function startMetrics(
  ctx: AppContext,
  opts: WorkFlags,
  metricsOpen: boolean,
  gate: () => WriteState | undefined,
) {
  if (!opts.metricsPort) return undefined;
  const [prometheus, work] = await Promise.all([
    import('../ops/metrics/prometheus.ts'),
    import('../ops/metrics/work-metrics.ts'),
  ]);
  const registry = prometheus.createRegistry();
  const histogram = prometheus.transferDurationHistogram(registry);
  const repairs = work.repairCounter(registry);
  const probe = contextReadiness(ctx);
  try {
    const server = await prometheus.serveMetrics(
      registry,
      opts.metricsPort,
      opts.metricsHost,
      metricsOpen ? undefined : ctx.config.dashboardToken,
      workerReadiness(gate, probe),
    );
    ctx.logger.info({ url: `${server.url}/metrics` }, 'metrics served');
    return {
      server,
      observe: (e: Parameters<typeof Prometheus.observeOutcome>[1]) =>
        prometheus.observeOutcome(histogram, e),
      countRepair: (r: Parameters<typeof WorkMetrics.countRepair>[1]) => work.countRepair(repairs, r),
      /** The gauges and counters of a `work` process. */
      gauges(handle: ReturnType<typeof startWorkers>, notifier: Notifier | undefined): void {
        prometheus.redisWriteGauges(registry, () => handle.writeState());
        prometheus.redisWaitCounters(registry, () => ctx.durability.stats);
        if (notifier) prometheus.notifyCounters(registry, () => notifier.stats);
        work.spoolGauges(registry, () => handle.spoolState());
      },
    };
  } catch (err) {
    // Nothing started yet but the context: close it, or its connections would keep the process up.
    await ctx.close();
    const code = (err as { code?: string }).code;
    throw new LearnerTransferError(
      'LT_USAGE',
      `--metrics-port: cannot listen on ${opts.metricsHost}:${opts.metricsPort} (${code ?? (err as Error).message})`,
      { cause: err },
    );
  }
}

function stoppedLine(result: WorkResult): string {
  return (
    `workers stopped (${result.reason}): ${result.succeeded} succeeded, ${result.failed} failed` +
    (result.runFailures > 0
      ? `; ${result.runFailures} learners of the runs worked on are in a failure state`
      : '') +
    result.awaitingApproval
      .slice(0, 5)
      .map(
        (a) =>
          `; run ${a.runId} is ${a.text}: ${a.awaiting} learners wait for a person ('learner-transfer approve --run ${a.runId}', exit ${EXIT.awaitingApproval})`,
      )
      .join('') +
    (result.unauthorizedOrgs.length
      ? `; every token refused (401) for: ${result.unauthorizedOrgs.join(', ')}`
      : '') +
    result.haltedOrgs
      .map(
        (o) =>
          `; organization ${o.org} is halted by the error budget: ${o.reason}; its learners wait ('learner-transfer resume --org ${o.org}' once the cause is fixed, exit ${EXIT.halted})`,
      )
      .join('')
  );
}

/**
 * What only a setting turns on (notifier, audit archive, token file reloader), loaded before the
 * workers start and only when set, so their modules are not on the way to the first call.
 */
async function optionalParts(config: Readonly<Config>) {
  const [notify, archive, retention, reload] = await Promise.all([
    config.notifyWebhookUrl ? import('../ops/notify/notifier.ts') : undefined,
    config.auditArchiveDir ? import('../ops/audit/archive.ts') : undefined,
    config.auditArchiveDir ? import('../ops/audit/retention.ts') : undefined,
    config.tokensFile ? import('../app/token-reload.ts') : undefined,
  ]);
  return { notify, archive, retention, reload };
}
type OptionalParts = Awaited<ReturnType<typeof optionalParts>>;

/** Follows LEARNER_API_TOKENS_FILE (SIGHUP, TOKENS_RELOAD_INTERVAL); returns what stops that. */
function followTokenFile(cli: Cli, ctx: AppContext, reload: OptionalParts['reload']) {
  const path = ctx.config.tokensFile;
  if (!path || !reload) return async () => undefined;
  const reloader: TokenReloader = new reload.TokenReloader(ctx, {
    path,
    intervalMs: ctx.config.tokensReloadMs,
  });
  // Without --org, an organization the file adds is served at once; with it, only those named.
  reloader.start();
  const offHangup = cli.onHangup(() => {
    ctx.logger.info({ file: path }, 'SIGHUP received: reading the token file again');
    reloader
      .reload('SIGHUP')
      .catch((err: unknown) =>
        ctx.logger.error({ err: (err as Error)?.message ?? String(err) }, 'token file reload failed'),
      );
  });
  return async () => {
    offHangup();
    await reloader.stop();
  };
}

/** AUDIT_ARCHIVE_DIR: the audit streams go to files and are trimmed (docs/audit-archive.md). */
function startAuditArchive(
  ctx: AppContext,
  orgs: readonly string[],
  { archive, retention }: OptionalParts,
): AuditArchiver | undefined {
  const dir = ctx.config.auditArchiveDir;
  if (!dir || !archive || !retention) return undefined;
  const archiver = new archive.AuditArchiver(ctx.redis, ctx.keys, { dir, logger: ctx.logger });
  archiver.start(ctx.config.auditArchiveIntervalMs, orgs);
  startPersonalRetention(ctx, archiver, dir, orgs, retention);
  return archiver;
}

/** AUDIT_PERSONAL_RETENTION: addresses and names past it leave the audit, now and hourly. */
function startPersonalRetention(
  ctx: AppContext,
  archiver: AuditArchiver,
  dir: string,
  orgs: readonly string[],
  { PERSONAL_RETENTION_INTERVAL_MS, removeOldPersonalData }: NonNullable<OptionalParts['retention']>,
): void {
  const retentionMs = ctx.config.auditPersonalRetentionMs;
  if (retentionMs <= 0) return;
  // The bodies kept beside this process's spool go too.
  const bodies = new BodyArchive(ctx.config.spoolDir);
  const deps = { redis: ctx.redis, keys: ctx.keys, dir, orgs, logger: ctx.logger, bodies };
  const pass = () => {
    removeOldPersonalData(deps, retentionMs, { archiver }).catch((err: Error) =>
      ctx.logger.warn(
        { err: err.message },
        'personal-data retention failed (tried again at the next interval)',
      ),
    );
  };
  pass();
  setInterval(pass, PERSONAL_RETENTION_INTERVAL_MS).unref();
}

/**
 * How long `work` drains after SIGINT/SIGTERM before it exits anyway: REQUEST_TIMEOUT + 5 s for
 * the workers, 5 s for spool and connections. A pod's terminationGracePeriodSeconds must exceed
 * it (docs/operations.md).
 */
export function workDrainBoundMs(requestTimeoutMs: number): number {
  return requestTimeoutMs + 10_000;
}

/** A signal stopped the work before it was done: say so (130), whatever the outcomes so far. */
function exitStatus(result: WorkResult, lostRedis: boolean): number {
  if (lostRedis) return EXIT.redis;
  if (result.reason === 'halted') return EXIT.halted;
  if (result.reason === 'unauthorized') return EXIT.unauthorized;
  if (result.reason === 'stopped') return EXIT.interrupted;
  if (result.awaitingApproval.length > 0) return EXIT.awaitingApproval;
  return result.failed > 0 || result.runFailures > 0 ? EXIT.failures : EXIT.ok;
}

export async function workCommand(cli: Cli, opts: WorkFlags): Promise<void> {
  const config = await cli.config({ requireBaseUrl: true, requireTokens: true });
  const orgs = opts.org ? opts.org.map((o) => requireOrg(config, o)) : [...config.orgs];
  const metricsOpen = checkMetricsHost(opts, config.dashboardToken);
  // At a terminal a live line counts the learners; their lines would scroll it away.
  const logFormat = cli.logFormat(config);
  const target = progressTarget(cli, logFormat);
  // A worker often starts beside Redis (compose, systemd): wait longer than a quick command.
  const ctx = await cli.context(config, {
    redisTimeoutMs: config.redisConnectTimeoutMs ?? 60_000,
    // Every connection of a `work` process ends with its pid (CLIENT LIST).
    connectionName: `learner-transfer:${process.pid}`,
    ...(target && logFormat === 'text' ? { logText: { skip: isLearnerInfo } } : {}),
  });
  // One token, one organization: refuse to start when Redis binds a token to another org key.
  const source = config.tokensFile ? `${TOKENS_FILE_VAR} ${config.tokensFile}` : undefined;
  await bindTokens(ctx.redis, ctx.keys.prefix, config.tokens, {
    logger: ctx.logger,
    ...(source ? { source } : {}),
  }).catch(async (err: unknown) => {
    await ctx.close();
    throw err;
  });
  const settings = await jobSettingsWarning(ctx, cli.env, orgs).catch(() => undefined);
  if (settings) ctx.logger.warn({ attempts: config.attempts, backoffMs: config.backoffMs }, settings);
  // Ready once the workers run and their write gate is open (readiness reads it at each probe).
  let gate: () => WriteState | undefined = () => undefined;
  const metrics = await startMetrics(ctx, opts, metricsOpen, () => gate());
  const concurrency = opts.concurrency ?? config.concurrency;
  const optional = await optionalParts(config);
  // Without --org, the organizations of the token file as it changes.
  const progress = target
    ? new WorkProgress(cli, ctx, () => (opts.org ? orgs : ctx.tokens.orgs()), target)
    : undefined;
  // NOTIFY_WEBHOOK_URL: hooked on the outcomes, off the transfer path (docs/notifications.md).
  const notifier = optional.notify?.Notifier.fromContext(ctx);
  notifier?.start();
  const handle = startWorkers(ctx, {
    onOutcome: (e) => {
      metrics?.observe(e);
      progress?.count(e);
      notifier?.noteOutcome(e);
    },
    ...notifier?.workHooks(),
    ...(metrics ? { onRepair: metrics.countRepair } : {}),
    orgs,
    concurrency,
    untilIdle: Boolean(opts.untilIdle),
    // HALT_AT: the canary's failure share above which its run is not approved by itself.
    canaryHaltShare: haltShareOf(config.haltAt),
    lockDurationMs: Math.max(5_000, config.requestTimeoutMs + 5_000),
    // Scheduled reconciles (schedule command) run in whichever work process takes them.
    control: opts.control === false ? false : {},
    followTokens: !opts.org,
  });
  gate = () => handle.writeState();
  metrics?.gauges(handle, notifier);
  ctx.logger.info({ orgs, concurrency, untilIdle: Boolean(opts.untilIdle) }, 'workers started');
  progress?.start();
  const stopFollowing = followTokenFile(cli, ctx, optional.reload);
  const archiver = startAuditArchive(ctx, orgs, optional);
  const off = cli.onShutdown(() => handle.stop(), workDrainBoundMs(config.requestTimeoutMs));
  // ioredis ends a connection for good only when it gives up reconnecting; a worker without Redis
  // would idle for ever. Stop (the spool keeps what is in hand) and exit 4 for a fresh process.
  let lostRedis = false;
  const onEnd = () => {
    lostRedis = true;
    ctx.logger.error('the Redis connection ended and will not reconnect: stopping this worker (exit 4)');
    void handle.stop();
    // Jobs in hand end on the closed connection's errors; should the stop itself hang, go anyway.
    cli.hooks.exitAfter(workDrainBoundMs(config.requestTimeoutMs), EXIT.redis);
  };
  ctx.redis.once('end', onEnd);
  const result = await handle.done;
  progress?.stop();
  await stopFollowing();
  // A last pass at a graceful stop (none when Redis is gone: there is nothing to read).
  await archiver?.stop(!lostRedis);
  // The end of the last run is said before the exit (within a bound), unless Redis is gone.
  await notifier?.stop(lostRedis ? 0 : undefined);
  ctx.redis.off('end', onEnd);
  off();
  await metrics?.server.close();
  await ctx.close();
  cli.warn(stoppedLine(result));
  // bench/load.ts reads the peak memory of each worker process from this line.
  if (cli.env.LT_REPORT_RSS) {
    cli.warn(`lt-rss ${JSON.stringify({ pid: process.pid, maxRssKb: process.resourceUsage().maxRSS })}`);
  }
  cli.exitCode = exitStatus(result, lostRedis);
  // A library's connection still reconnecting (to a replica, say) must not keep a finished worker
  // alive: exit regardless, soon.
  cli.hooks.exitAfter(3000);
}
