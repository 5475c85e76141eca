// GET /metrics for Prometheus: the fleet's gauges, read from Redis at scrape time (one status
// read shared by all), and the dashboard's own request durations. Transfer call durations are the
// worker's (ops/metrics/prometheus.ts): only the process that makes the calls sees them.
import type { FastifyInstance } from 'fastify';
import { Gauge, Histogram, type Registry } from 'prom-client';
import type { AppContext } from '../app/context.ts';
import { createRegistry, redisWriteGauges } from '../ops/metrics/prometheus.ts';
import { collectStatus, type Status } from '../ops/views/status.ts';
import type { PauseInfo } from '../limiter/types.ts';

const SNAPSHOT_MS = 1000;

export function dashboardRegistry(ctx: AppContext): { registry: Registry; httpDuration: Histogram<string> } {
  const registry = createRegistry();
  const snapshot = statusSnapshot(ctx);
  learnerGauge(registry, snapshot);
  budgetGauges(registry, snapshot);
  jobGauge(registry, snapshot);
  pauseGauge(registry, snapshot);
  etaGauges(registry, snapshot);
  redisWriteGauges(registry, async () => (await snapshot()).redis ?? undefined);
  const httpDuration = new Histogram({
    name: 'lt_dashboard_http_request_duration_seconds',
    help: 'Duration of dashboard HTTP requests by method, route and status',
    labelNames: ['method', 'route', 'status'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });
  return { registry, httpDuration };
}

type Snapshot = () => Promise<Status>;

/** One status read shared by every gauge of a scrape (and by scrapes within SNAPSHOT_MS). */
function statusSnapshot(ctx: AppContext): Snapshot {
  let cached: { at: number; status: Promise<Status> } | undefined;
  return () => {
    const now = Date.now();
    if (!cached || now - cached.at > SNAPSHOT_MS) {
      cached = { at: now, status: collectStatus(ctx) };
      cached.status.catch(() => (cached = undefined));
    }
    return cached.status;
  };
}

function learnerGauge(registry: Registry, snapshot: Snapshot): void {
  new Gauge({
    name: 'lt_learners',
    help: 'Learners per organization and state or outcome code (queued, retrying, transferred, not-found, ...)',
    labelNames: ['org', 'outcome'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const o of (await snapshot()).orgs)
        for (const [outcome, n] of Object.entries(o.learners)) this.set({ org: o.org, outcome }, n ?? 0);
    },
  });
}

function budgetGauges(registry: Registry, snapshot: Snapshot): void {
  new Gauge({
    name: 'lt_budget_remaining',
    help: 'Transfer calls left in the current window: per token (scope=token) and per organization (scope=org)',
    labelNames: ['org', 'scope', 'token'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const o of (await snapshot()).orgs) {
        this.set({ org: o.org, scope: 'org', token: '' }, o.budget.org.remaining);
        for (const t of o.budget.tokens)
          this.set({ org: o.org, scope: 'token', token: t.tokenId }, t.remaining);
      }
    },
  });
  new Gauge({
    name: 'lt_budget_limit',
    help: 'Transfer calls allowed per window, per token and per organization',
    labelNames: ['org', 'scope', 'token'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const o of (await snapshot()).orgs) {
        this.set({ org: o.org, scope: 'org', token: '' }, o.budget.org.limit);
        for (const t of o.budget.tokens) this.set({ org: o.org, scope: 'token', token: t.tokenId }, t.limit);
      }
    },
  });
  new Gauge({
    name: 'lt_token_paused',
    help: '1 when the service refused the token (401) and it is paused until unpaused',
    labelNames: ['org', 'token'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const o of (await snapshot()).orgs)
        for (const t of o.budget.tokens)
          this.set({ org: o.org, token: t.tokenId }, t.blocked?.reason === '401' ? 1 : 0);
    },
  });
}

function jobGauge(registry: Registry, snapshot: Snapshot): void {
  new Gauge({
    name: 'lt_jobs',
    help: 'BullMQ jobs per organization queue and state',
    labelNames: ['org', 'state'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const o of (await snapshot()).orgs)
        for (const [state, n] of Object.entries(o.jobs)) this.set({ org: o.org, state }, n);
    },
  });
}

/** Seconds since `pause` (a person) stopped an organization or a token; 0 while it runs. */
function pauseGauge(registry: Registry, snapshot: Snapshot): void {
  const since = (p: PauseInfo | null, now: number) => {
    const at = p ? Date.parse(p.at) : NaN;
    return p ? Math.max(0, Number.isNaN(at) ? 0 : (now - at) / 1000) : 0;
  };
  new Gauge({
    name: 'lt_paused_seconds',
    help: 'Seconds since the organization (scope=org) or token (scope=token) was paused with pause or the Controls page; 0 when not paused',
    labelNames: ['org', 'scope', 'token'],
    registers: [registry],
    async collect() {
      this.reset();
      const now = Date.now();
      for (const o of (await snapshot()).orgs) {
        this.set({ org: o.org, scope: 'org', token: '' }, since(o.budget.org.paused, now));
        for (const t of o.budget.tokens)
          this.set({ org: o.org, scope: 'token', token: t.tokenId }, since(t.paused, now));
      }
    },
  });
}

/** When the work left will be done, and whether the run window lets transfers run now. */
function etaGauges(registry: Registry, snapshot: Snapshot): void {
  new Gauge({
    name: 'lt_eta_seconds',
    help: 'Seconds until the learners left (queued, retrying) are done at the limits in force; 0 when nothing is left; absent when they never will (paused, no usable token)',
    labelNames: ['org'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const o of (await snapshot()).orgs)
        if (Number.isFinite(o.eta.ms)) this.set({ org: o.org }, o.remaining > 0 ? o.eta.ms / 1000 : 0);
    },
  });
  new Gauge({
    name: 'lt_run_window_open',
    help: '1 when the run window lets transfers run now (or none is set), 0 in its closed hours',
    labelNames: ['org'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const o of (await snapshot()).orgs) this.set({ org: o.org }, o.runWindow?.open === false ? 0 : 1);
    },
  });
}

export function registerMetrics(app: FastifyInstance, ctx: AppContext): void {
  const { registry, httpDuration } = dashboardRegistry(ctx);
  app.addHook('onResponse', async (req, reply) => {
    const route = req.routeOptions.url ?? 'unmatched';
    httpDuration.observe(
      { method: req.method, route, status: String(reply.statusCode) },
      reply.elapsedTime / 1000,
    );
  });
  app.get('/metrics', async (_req, reply) =>
    reply
      .type(registry.contentType)
      .header('cache-control', 'no-store')
      .send(await registry.metrics()),
  );
}
