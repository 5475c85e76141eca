// Prometheus metrics of the worker and the dashboard: one registry per part (never prom-client's
// global), the transfer-duration histogram, and the worker's /metrics server.
import { createServer, type Server } from 'node:http';
import { collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { NotifyStats } from '../notify/send.ts';
import type { DurabilityStats } from '../../redis/durability.ts';
import type { WriteState } from '../../redis/writes.ts';
import { httpAnswer } from '../../core/errors.ts';
import { FORBIDDEN_HOST, isHostAllowed, presentedCredential, sameSecret } from '../../core/http-access.ts';
import type { Readiness } from './health.ts';

/** Transfer calls take tens of ms to the request timeout (30 s by default). */
const DURATION_BUCKETS = [0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export function createRegistry(options: { defaultMetrics?: boolean } = {}): Registry {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry, prefix: 'lt_' });
  return registry;
}

export type TransferDurationHistogram = Histogram<'org' | 'outcome'>;

export function transferDurationHistogram(registry: Registry): TransferDurationHistogram {
  return new Histogram({
    name: 'lt_transfer_request_duration_seconds',
    help: 'Duration of transfer calls to the Learner API, by organization and outcome code',
    labelNames: ['org', 'outcome'],
    buckets: DURATION_BUCKETS,
    registers: [registry],
  });
}

/** What the histogram needs of a transfer's outcome (the worker's OutcomeEvent has it). */
export interface TimedOutcome {
  org: string;
  code: string;
  durationMs: number;
}

export function observeOutcome(h: TransferDurationHistogram, e: TimedOutcome): void {
  h.observe({ org: e.org, outcome: e.code }, e.durationMs / 1000);
}

/**
 * Whether Redis takes writes (1/0) and its memory use as a share of maxmemory, read at scrape time from
 * `read` (a WriteGate's state in a worker, a cached check in the dashboard). Undefined (not known yet)
 * leaves the writable gauge empty rather than guessing.
 */
export function redisWriteGauges(
  registry: Registry,
  read: () => WriteState | undefined | Promise<WriteState | undefined>,
): void {
  new Gauge({
    name: 'learner_transfer_redis_writable',
    help: '1 when Redis takes writes and is under the high-water mark (REDIS_HIGH_WATER), else 0 (label cause)',
    labelNames: ['cause'],
    registers: [registry],
    async collect() {
      this.reset();
      const s = await read();
      if (s) this.set({ cause: s.cause }, s.writable ? 1 : 0);
    },
  });
  new Gauge({
    name: 'learner_transfer_redis_memory_ratio',
    help: 'Redis used_memory as a share of maxmemory; 0 when maxmemory is 0 (no limit) or not known',
    registers: [registry],
    async collect() {
      this.reset();
      const ratio = (await read())?.memoryRatio;
      if (ratio !== null && ratio !== undefined) this.set(ratio);
    },
  });
}

/** WAITs for a replica after the writes that must survive a failover (redis/durability.ts), by result. */
export function redisWaitCounters(registry: Registry, stats: () => DurabilityStats): void {
  new Gauge({
    name: 'learner_transfer_redis_waits_total',
    help: 'WAIT 1 after a permit or a finished attempt, by result: acknowledged by a replica, unacknowledged (REDIS_WAIT_TIMEOUT passed), or joined (covered by a WAIT under way)',
    labelNames: ['result'],
    registers: [registry],
    collect() {
      const s = stats();
      this.set({ result: 'acknowledged' }, s.waits - s.unacknowledged);
      this.set({ result: 'unacknowledged' }, s.unacknowledged);
      // Writes covered by a WAIT another attempt had under way (group commit): no WAIT of their own.
      this.set({ result: 'joined' }, s.joined);
    },
  });
}

/** Notifications of this process by result (ops/notify/send.ts). */
export function notifyCounters(registry: Registry, stats: () => NotifyStats): void {
  new Gauge({
    name: 'learner_transfer_notifications_total',
    help: 'Webhook notifications of this process by result: sent, failed (after every try, or refused with a 4xx), skipped (another process had claimed the event), dropped (the queue was full)',
    labelNames: ['result'],
    registers: [registry],
    collect() {
      const s = stats();
      for (const result of ['sent', 'failed', 'skipped', 'dropped'] as const) this.set({ result }, s[result]);
    },
  });
}

export interface MetricsServer {
  url: string;
  close(): Promise<void>;
}

/**
 * Serves GET /metrics, /healthz and (given `readiness`) /readyz of a registry: the worker has no web
 * framework, and needs none. Host names follow the dashboard's rule (isHostAllowed): without a token only
 * loopback names, so that a page of another site cannot read the metrics through DNS rebinding. With a
 * token, /metrics answers only `Authorization: Bearer <token>` (or it as basic-auth password). The probes
 * (PUBLIC_PATHS) stay open to any name: the kubelet probes a pod by its address.
 */
export async function serveMetrics(
  registry: Registry,
  port: number,
  host = '127.0.0.1',
  token?: string,
  readiness?: () => Promise<Readiness>,
): Promise<MetricsServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    if (!isHostAllowed(path, req.headers.host, token)) {
      res
        .writeHead(httpAnswer('LT_HTTP_FORBIDDEN_HOST').status, {
          'content-type': 'application/json',
          'cache-control': 'no-store',
        })
        .end(JSON.stringify(FORBIDDEN_HOST));
      return;
    }
    if (req.method === 'GET' && path === '/metrics' && token !== undefined) {
      const given = presentedCredential(req.headers.authorization);
      if (given === undefined || !sameSecret(given, token)) {
        res
          .writeHead(401, { 'content-type': 'text/plain', 'www-authenticate': 'Bearer realm="metrics"' })
          .end('DASHBOARD_TOKEN required (Authorization: Bearer)\n');
        return;
      }
    }
    if (req.method === 'GET' && path === '/metrics') {
      registry.metrics().then(
        (text) =>
          res.writeHead(200, { 'content-type': registry.contentType, 'cache-control': 'no-store' }).end(text),
        (err: Error) =>
          res.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics failed: ${err.message}\n`),
      );
    } else if (req.method === 'GET' && path === '/healthz') {
      // Liveness: answered by the event loop itself, so a process whose loop is stuck fails it.
      res.writeHead(200, { 'content-type': 'text/plain', 'cache-control': 'no-store' }).end('ok\n');
    } else if (req.method === 'GET' && path === '/readyz' && readiness) {
      readiness().then(
        ({ statusCode, body }) =>
          res
            .writeHead(statusCode, { 'content-type': 'application/json', 'cache-control': 'no-store' })
            .end(JSON.stringify(body)),
        () =>
          res
            .writeHead(503, { 'content-type': 'application/json', 'cache-control': 'no-store' })
            .end(JSON.stringify({ status: 'unavailable', redis: 'not checked' })),
      );
    } else {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address();
  const actual = typeof address === 'object' && address ? address.port : port;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${actual}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
