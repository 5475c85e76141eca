// Live parts of the dashboard over a real run: the server-sent event stream (real socket), /metrics
// for Prometheus, a token refused with 401 shown as an alert everywhere, and the worker's own /metrics
// with the transfer-call duration histogram (src/ops/metrics/prometheus.ts, as `work --metrics-port` serves it).
import { sseFrames } from '../helpers/sse.ts';
import type { FastifyInstance } from 'fastify';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDashboard } from '../../src/dashboard/server.ts';
import {
  createRegistry,
  observeOutcome,
  serveMetrics,
  transferDurationHistogram,
  type MetricsServer,
} from '../../src/ops/metrics/prometheus.ts';
import { authed, bearer, failureScenario, type Scenario } from '../helpers/dashboard.ts';

let s: Scenario;
let app: FastifyInstance;
let base: string;
let workerMetrics: MetricsServer;
const workerRegistry = createRegistry({ defaultMetrics: false });
const histogram = transferDurationHistogram(workerRegistry);

beforeAll(async () => {
  s = await failureScenario({ onOutcome: (e) => observeOutcome(histogram, e) });
  app = await buildDashboard(s.h.ctx, { liveIntervalMs: 200, bullBoard: false });
  base = await app.listen({ port: 0, host: '127.0.0.1' });
  workerMetrics = await serveMetrics(workerRegistry, 0);
});
afterAll(async () => {
  await workerMetrics?.close();
  await app?.close();
  await s?.h.close();
});

/** Reads server-sent events until `count` events of `name` arrived; returns their parsed data. */
async function readEvents(name: string, count: number): Promise<unknown[]> {
  const ac = new AbortController();
  const res = await request(`${base}/api/live`, { headers: bearer, signal: ac.signal });
  expect(res.statusCode).toBe(200);
  expect(res.headers['content-type']).toContain('text/event-stream');
  const events: unknown[] = [];
  try {
    for await (const { event, data } of sseFrames(res.body)) {
      if (event === name && data) events.push(JSON.parse(data));
      if (events.length >= count) break;
    }
  } finally {
    ac.abort();
  }
  return events;
}

describe('live', () => {
  it('streams the overview as server-sent events, again every interval', async () => {
    const started = Date.now();
    const events = (await readEvents('overview', 2)) as {
      runs: { id: string; progress: unknown }[];
      at: string;
    }[];
    expect(events).toHaveLength(2);
    expect(events[0]?.runs[0]).toMatchObject({
      id: s.runId,
      progress: { done: 2, failed: 8, waiting: 0, total: 10 },
    });
    expect(Date.parse(events[1]?.at ?? '')).toBeGreaterThan(Date.parse(events[0]?.at ?? ''));
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('refuses the stream without the token', async () => {
    const res = await request(`${base}/api/live`);
    expect(res.statusCode).toBe(401);
    await res.body.text();
  });

  it('shows a token refused with 401 as an alert: API, stream, page and metrics', async () => {
    const token = s.h.config.tokens[0];
    if (!token) throw new Error('no token');
    await s.h.ctx.budget.block('acme', token.id, 'indefinite', '401');
    try {
      const o = (await authed(app, { url: '/api/overview' })).json();
      expect(o.alerts).toEqual([
        expect.objectContaining({
          level: 'error',
          org: 'acme',
          tokenId: token.id,
          message: expect.stringContaining('(401)'),
        }),
      ]);
      // A new stream first gets the shared snapshot (up to one interval old), then the next collection.
      const live = ((await readEvents('overview', 2)) as { alerts: { tokenId: string }[] }[]).at(-1);
      expect(live?.alerts[0]?.tokenId).toBe(token.id);
      const page = await authed(app, { url: '/' });
      expect(page.body).toMatch(/class="alert alert-error"[^>]*>\s*token [0-9a-f]+ of acme is paused/);
      expect(page.body).toContain('paused (401)');
      const metrics = (await authed(app, { url: '/metrics' })).body;
      expect(metrics).toContain(`lt_token_paused{org="acme",token="${token.id}"} 1`);
    } finally {
      await s.h.ctx.budget.unblock('acme', token.id);
    }
    expect((await authed(app, { url: '/api/overview' })).json().alerts).toEqual([]);
  });
});

describe('metrics', () => {
  it('GET /metrics: learners by org and outcome, budget per token and org, jobs by state, request durations', async () => {
    await authed(app, { url: '/api/failures' });
    const r = await authed(app, { url: '/metrics' });
    expect(r.statusCode).toBe(200);
    expect(r.headers['content-type']).toContain('text/plain');
    const text = r.body;
    expect(text).toContain('lt_learners{org="acme",outcome="transferred"} 2');
    expect(text).toContain('lt_learners{org="acme",outcome="forbidden"} 2');
    expect(text).toContain('lt_learners{org="acme",outcome="server-error"} 4');
    expect(text).toMatch(/lt_budget_remaining\{org="acme",scope="org",token=""\} \d+/);
    for (const t of s.h.config.tokens) {
      expect(text).toMatch(
        new RegExp(`lt_budget_remaining\\{org="acme",scope="token",token="${t.id}"\\} \\d+`),
      );
      expect(text).toContain(`lt_budget_limit{org="acme",scope="token",token="${t.id}"} 20`);
    }
    expect(text).toContain('lt_jobs{org="acme",state="waiting"} 0');
    expect(text).toMatch(
      /lt_dashboard_http_request_duration_seconds_count\{method="GET",route="\/api\/failures",status="200"\} [1-9]/,
    );
    expect(text).toContain('lt_process_cpu_user_seconds_total');
    expect((await app.inject({ url: '/metrics' })).statusCode).toBe(401);
  });

  it("the worker's /metrics has the transfer-call duration histogram by org and outcome", async () => {
    const res = await request(`${workerMetrics.url}/metrics`);
    expect(res.statusCode).toBe(200);
    const text = await res.body.text();
    expect(text).toContain('# TYPE lt_transfer_request_duration_seconds histogram');
    expect(text).toContain('lt_transfer_request_duration_seconds_count{org="acme",outcome="transferred"} 2');
    expect(text).toContain('lt_transfer_request_duration_seconds_count{org="acme",outcome="server-error"} 8');
    expect(text).toMatch(
      /lt_transfer_request_duration_seconds_bucket\{le="\+Inf",org="acme",outcome="forbidden"\} 2/,
    );
    const missing = await request(`${workerMetrics.url}/nope`);
    expect(missing.statusCode).toBe(404);
    await missing.body.text();
  });
});
