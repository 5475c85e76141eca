// The pieces a command needs, built once from a Config: one Redis connection, keys, store, queues,
// producer, limiter, and (for commands that call the API) the client.
import { LearnerApiClient } from '../api/client.ts';
import type { Config } from '../core/config.ts';
import { describeEgress, egressIsSet } from '../core/egress.ts';
import type { Logger } from '../core/log.ts';
import { Producer } from '../queue/producer.ts';
import { QueueSet } from '../queue/queues.ts';
import { LogThrottle } from '../core/log-throttle.ts';
import type { SpanExporter } from '@opentelemetry/sdk-trace-node';
import { startTracing } from '../core/tracing-start.ts';
import {
  openRedisContext,
  readContextOf,
  readParts,
  startOrClose,
  startState,
  type ReadContext,
  type ReadContextOptions,
} from './read-context.ts';

// Said here too, where the commands have always found them.
export { liveSecrets, requireOrg } from './read-context.ts';

export interface AppContext extends ReadContext {
  queues: QueueSet;
  producer: Producer;
  /** Present when the config has a base URL. */
  client: LearnerApiClient | undefined;
}

/** What a caller may give createContext instead of what it makes from the config. */
export interface ContextOptions extends ReadContextOptions {
  /** Where spans go instead of the configured exporters (a test's in-memory exporter): tracing on. */
  traceExporter?: SpanExporter;
}

export async function createContext(
  config: Readonly<Config>,
  options: ContextOptions = {},
): Promise<AppContext> {
  const opened = await openRedisContext(config, options);
  const { logger, redis } = opened;
  // Before the queues (BullMQ's telemetry is fixed when a Queue is made); off, it loads nothing.
  const tracing = await startTracing(config.tracing, options.traceExporter);
  const parts = readParts(config, opened);
  const base = readContextOf(config, opened, parts);
  const { keys, store, claims } = parts;
  // A Redis that refuses writes makes every queue say so on every call: one line per interval, counted.
  const queueErrors = new LogThrottle(logger);
  const queues = new QueueSet(redis, keys, config, (org, err) =>
    queueErrors.warn({ org, err: err.message }, 'queue redis connection error'),
  );
  const producer = new Producer(queues, store, claims, keys);
  const client = config.apiBaseUrl ? createApiClient(config, config.apiBaseUrl, logger) : undefined;
  const context: AppContext = {
    ...base,
    queues,
    producer,
    client,
    async close() {
      await queues.close();
      queueErrors.stop();
      await client?.close();
      await base.close();
      await tracing.stop(); // last: the spans of the closing above are exported too
    },
  };
  await startOrClose(context, startState(config, { ...opened, ...parts }));
  return context;
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

/** The Learner API client: a stall of this process is logged as such, not blamed on the service. */
function createApiClient(config: Readonly<Config>, baseUrl: string, logger: Logger): LearnerApiClient {
  // Once per process: the way out to the service, when it is not the plain direct one (core/egress.ts).
  if (config.egress && egressIsSet(config.egress)) {
    logger.info({ egress: describeEgress(baseUrl, config.egress) }, 'learner api egress');
  }
  return new LearnerApiClient({
    baseUrl,
    egress: config.egress,
    userAgent: config.userAgent,
    requestTimeoutMs: config.requestTimeoutMs,
    connectTimeoutMs: config.connectTimeoutMs,
    // Once, at the first call of the service: a command that never calls it has nothing to warn about.
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
