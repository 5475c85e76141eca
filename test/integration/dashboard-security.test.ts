// The dashboard's guards, on a real run with failures: DASHBOARD_TOKEN as Bearer or basic-auth password
// (and nothing else), CSRF on every state-changing request (without it nothing changes), read-only mode,
// loopback Host names when no token is set, the CLI's refusal to bind elsewhere without a token, no
// token secret in any response of any route, no-store on every response, and a /readyz whose Redis
// probes do not follow the request rate.
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { READY_PROBE_INTERVAL_MS } from '../../src/dashboard/routes/health.ts';
import { buildDashboard } from '../../src/dashboard/server.ts';
import { request } from 'undici';
import { runCli, runCommand, spawnCli, waitExit } from '../helpers/cli.ts';
import { startHarness } from '../helpers/pipeline.ts';
import { waitFor } from '../helpers/wait.ts';
import { startOwnRedis } from '../helpers/redis-server.ts';
import { countCommands } from '../helpers/redis.ts';
import {
  authed,
  basic,
  bearer,
  csrfFromPage,
  DASHBOARD_TOKEN,
  failureScenario,
  FORBIDDEN,
  SECRETS,
  SERVER_ERROR,
  TRANSFERRED,
  type Scenario,
} from '../helpers/dashboard.ts';

let s: Scenario;
let app: FastifyInstance;
let readOnly: FastifyInstance;

beforeAll(async () => {
  s = await failureScenario();
  app = await buildDashboard(s.h.ctx);
  readOnly = await buildDashboard(s.h.ctx, { readOnly: true, bullBoard: false });
});
afterAll(async () => {
  await app?.close();
  await readOnly?.close();
  await s?.h.close();
});

const ROUTES = [
  '/',
  '/failures',
  '/failures?code=server-error',
  `/learners/acme/${TRANSFERRED[0]}`,
  '/api/overview',
  '/api/runs',
  '/api/failures',
  `/api/learners/acme/${TRANSFERRED[0]}`,
  `/api/learners?ids=acme:${TRANSFERRED[0]}`,
  '/api/csrf',
  '/metrics',
  '/assets/app.js',
  '/assets/app.css',
  '/queues',
  '/queues/api/queues?activeQueue=transfers-%7Bacme%7D&status=failed&page=1',
];

describe('authentication', () => {
  it('refuses every route but the probes without the token, and asks the browser for basic auth', async () => {
    for (const url of ROUTES) {
      const r = await app.inject({ url });
      expect(r.statusCode, url).toBe(401);
      expect(r.headers['www-authenticate'], url).toBe(
        'Basic realm="learner-transfer dashboard", charset="UTF-8"',
      );
    }
    expect((await app.inject({ url: '/healthz' })).statusCode).toBe(200);
    expect((await app.inject({ url: '/readyz' })).json()).toEqual({ status: 'ready', redis: 'ok' });
  });

  it('accepts the token as Bearer or as the basic-auth password, and nothing close to it', async () => {
    expect((await app.inject({ url: '/api/overview', headers: bearer })).statusCode).toBe(200);
    expect((await app.inject({ url: '/', headers: basic(DASHBOARD_TOKEN) })).statusCode).toBe(200);
    expect((await app.inject({ url: '/', headers: basic(DASHBOARD_TOKEN, '') })).statusCode).toBe(200);
    for (const authorization of [
      `Bearer ${DASHBOARD_TOKEN}x`,
      `Bearer ${DASHBOARD_TOKEN.slice(0, -1)}`,
      `Bearer`,
      `Token ${DASHBOARD_TOKEN}`,
      basic(`${DASHBOARD_TOKEN} `).authorization as string,
      `Basic ${Buffer.from(DASHBOARD_TOKEN).toString('base64')}`, // no user:password form
      DASHBOARD_TOKEN,
    ]) {
      expect(
        (await app.inject({ url: '/api/overview', headers: { authorization } })).statusCode,
        authorization,
      ).toBe(401);
    }
  });

  it('puts bull-board under /queues behind the same authentication, read-only', async () => {
    const page = await authed(app, { url: '/queues' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toContain('text/html');
    const api = await authed(app, { url: '/queues/api/queues' });
    expect(api.statusCode).toBe(200);
    const q = api.json().queues[0];
    expect(q.name).toBe('transfers-{acme}');
    expect(q.readOnlyMode).toBe(true);
  });

  it('without a token serves only loopback Host names (DNS rebinding)', async () => {
    const open = await buildDashboard(s.h.ctx, { token: undefined, bullBoard: false });
    try {
      expect((await open.inject({ url: '/api/overview' })).statusCode).toBe(200); // Host: localhost:80
      expect((await open.inject({ url: '/', headers: { host: '127.0.0.1:8080' } })).statusCode).toBe(200);
      const evil = await open.inject({ url: '/api/overview', headers: { host: 'evil.example:8080' } });
      expect(evil.statusCode).toBe(403);
      expect(evil.json().error).toBe('forbidden-host');
      // The probes reveal nothing and stay open to any name.
      expect((await open.inject({ url: '/healthz', headers: { host: 'evil.example' } })).statusCode).toBe(
        200,
      );
    } finally {
      await open.close();
    }
    // With a token, the token decides, whatever the name.
    const named = await app.inject({ url: '/api/overview', headers: { ...bearer, host: 'dash.example' } });
    expect(named.statusCode).toBe(200);
    expect((await app.inject({ url: '/api/overview', headers: { host: 'dash.example' } })).statusCode).toBe(
      401,
    );
  });
});

describe('caching', () => {
  it('every response but the static assets says Cache-Control: no-store (the JSON API and bull-board too)', async () => {
    let checked = 0;
    for (const url of [...ROUTES, '/queues/api/redis/stats', '/healthz', '/readyz', '/api/nope']) {
      if (url.startsWith('/assets/')) continue;
      for (const r of [await authed(app, { url }), await app.inject({ url })]) {
        expect(r.headers['cache-control'], `${url} ${r.statusCode}`).toBe('no-store');
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(25);
    // Refusals too: a wrong Host name without a token.
    const open = await buildDashboard(s.h.ctx, { token: undefined, bullBoard: false });
    try {
      const evil = await open.inject({ url: '/api/overview', headers: { host: 'evil.example' } });
      expect(evil.statusCode).toBe(403);
      expect(evil.headers['cache-control']).toBe('no-store');
    } finally {
      await open.close();
    }
  });
});

describe('CSRF', () => {
  const id = SERVER_ERROR[0] as number;
  const body = { learners: [`acme:${id}`] };

  it('refuses a state-changing request without a valid token, and changes nothing', async () => {
    const other = await buildDashboard(s.h.ctx, { bullBoard: false }); // its own secret
    const foreign = await csrfFromPage(other);
    await other.close();
    // The scenario is shared: another test may have re-queued a learner already. Nothing changes here.
    const before = await s.h.ctx.store.get('acme', id);
    const waitingBefore = (await s.h.ctx.queues.get('acme').getJobCounts('waiting')).waiting;
    for (const headers of [
      {},
      { 'x-csrf-token': '' },
      { 'x-csrf-token': 'abc' },
      { 'x-csrf-token': foreign },
    ]) {
      const r = await authed(app, { method: 'POST', url: '/api/retry', headers, payload: body });
      expect(r.statusCode, JSON.stringify(headers)).toBe(403);
      expect(r.json().error).toBe('csrf');
    }
    const all = await authed(app, { method: 'POST', url: '/api/retry', payload: { all: true } });
    expect(all.statusCode).toBe(403);
    // bull-board's own actions are state-changing requests too.
    const bb = await authed(app, {
      method: 'PUT',
      url: '/queues/api/queues/transfers-%7Bacme%7D/retry/failed',
    });
    expect(bb.statusCode).toBe(403);
    expect(bb.json().error).toBe('csrf');
    expect(await s.h.ctx.store.get('acme', id)).toEqual(before);
    expect((await s.h.ctx.queues.get('acme').getJobCounts('waiting')).waiting).toBe(waitingBefore);
  });

  it('accepts the token from the page (and from GET /api/csrf) with the credentials', async () => {
    const fromApi = (await authed(app, { url: '/api/csrf' })).json();
    expect(fromApi.header).toBe('x-csrf-token');
    const r = await authed(app, {
      method: 'POST',
      url: '/api/retry',
      headers: { 'x-csrf-token': fromApi.token },
      payload: body,
    });
    expect(r.statusCode, r.body).toBe(200);
    expect(r.json().requeued).toBe(1);
    expect((await s.h.ctx.store.get('acme', id))?.b).toBe('queued');
    // A CSRF token is not a credential.
    const noAuth = await app.inject({
      method: 'POST',
      url: '/api/retry',
      headers: { 'x-csrf-token': await csrfFromPage(app) },
      payload: body,
    });
    expect(noAuth.statusCode).toBe(401);
  });
});

describe('read-only', () => {
  it('hides the retry controls on every page', async () => {
    const failures = await authed(readOnly, { url: '/failures' });
    expect(failures.statusCode).toBe(200);
    expect(failures.body).toContain('data-read-only="true"');
    expect(failures.body).toContain(`<tr data-learner="acme:${FORBIDDEN[0]}">`);
    for (const marker of ['retry-all', 'retry-selected', 'retry-one', 'name="learner"'])
      expect(failures.body).not.toContain(marker);
    const learner = await authed(readOnly, { url: `/learners/acme/${FORBIDDEN[0]}` });
    expect(learner.body).not.toContain('retry this learner');
  });

  it('refuses retries even with a valid CSRF token, and changes nothing', async () => {
    const csrf = await csrfFromPage(readOnly);
    const before = await s.h.ctx.store.get('acme', FORBIDDEN[0] as number);
    for (const payload of [{ learners: [`acme:${FORBIDDEN[0]}`] }, { all: true }]) {
      const r = await authed(readOnly, {
        method: 'POST',
        url: '/api/retry',
        headers: { 'x-csrf-token': csrf },
        payload,
      });
      expect(r.statusCode).toBe(403);
      expect(r.json().error).toBe('read-only');
    }
    expect(await s.h.ctx.store.get('acme', FORBIDDEN[0] as number)).toEqual(before);
  });
});

describe('secrets', () => {
  it('no API token and no dashboard token in any response body or header of any route', async () => {
    let checked = 0;
    for (const target of [app, readOnly]) {
      for (const url of ROUTES) {
        if (target === readOnly && url.startsWith('/queues')) continue;
        const r = await authed(target, { url });
        expect(r.statusCode, url).toBe(200);
        const everything = `${JSON.stringify(r.headers)}\n${r.body}`;
        for (const secret of SECRETS) expect(everything, `${url} leaks a secret`).not.toContain(secret);
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(20);
    // Token ids (fingerprints) are what the pages show instead.
    const overview = (await authed(app, { url: '/api/overview' })).json();
    expect(overview.orgs[0].budget.tokens.map((t: { tokenId: string }) => t.tokenId)).toEqual(
      s.h.config.tokens.map((t) => t.id),
    );
  });

  it('keeps DASHBOARD_TOKEN out of JSON.stringify(config) and of config errors', async () => {
    expect(s.h.config.dashboardToken).toBe(DASHBOARD_TOKEN);
    expect(JSON.stringify(s.h.config)).not.toContain(DASHBOARD_TOKEN);
    const r = await runCommand(['status'], { DASHBOARD_TOKEN: 'short secret!' });
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('DASHBOARD_TOKEN: expected at least 16 characters');
    expect(r.stderr).not.toContain('short secret!');
  });
});

describe('CLI', () => {
  it('refuses a non-loopback host without DASHBOARD_TOKEN, with a clear message', async () => {
    const r = await runCli(['dashboard', '--host', '0.0.0.0', '--port', '0'], {
      REDIS_URL: s.h.env.REDIS_URL as string,
      QUEUE_PREFIX: s.h.prefix,
    });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--host 0.0.0.0 is not a loopback address: set DASHBOARD_TOKEN');
  });

  it('serves the dashboard until SIGTERM, asking for the token', async () => {
    const child = spawnCli(['dashboard', '--port', '0'], {
      REDIS_URL: s.h.env.REDIS_URL as string,
      QUEUE_PREFIX: s.h.prefix,
      LEARNER_API_TOKENS: s.h.env.LEARNER_API_TOKENS as string,
      DASHBOARD_TOKEN,
    });
    try {
      const url = await waitFor(
        "the dashboard's address on its stdout",
        () => /dashboard on (http:\/\/127\.0\.0\.1:\d+)\//.exec(child.output.stdout)?.[1],
        (found) => found !== undefined,
        { everyMs: 100, show: () => `stdout ${child.output.stdout}; stderr ${child.output.stderr}` },
      );
      expect(child.output.stdout).toContain('(DASHBOARD_TOKEN required)');
      const refused = await request(`${url}/api/overview`);
      expect(refused.statusCode).toBe(401);
      await refused.body.text();
      const ok = await request(`${url}/api/overview`, { headers: bearer });
      expect(ok.statusCode).toBe(200);
      expect(((await ok.body.json()) as { runs: { id: string }[] }).runs[0]?.id).toBe(s.runId);
    } finally {
      child.kill('SIGTERM');
    }
    const exit = await waitExit(child, 10_000);
    expect(exit.code).toBe(0);
    expect(exit.stdout).toContain('dashboard stopped');
    for (const secret of SECRETS) expect(exit.stdout + exit.stderr).not.toContain(secret);
  });
});

/** Calls of every command a Redis served since its last CONFIG RESETSTAT (INFO commandstats). */

describe('readiness probe', () => {
  it('costs at most one Redis probe per second, however many requests arrive (counted by Redis)', async () => {
    const own = await startOwnRedis();
    const h = await startHarness({ tag: 'dash-ready-n', redisUrl: own.url });
    const probe = await buildDashboard(h.ctx, { bullBoard: false });
    const counter = new Redis(own.url);
    // Counted by Redis itself (INFO commandstats), exactly.
    const counted = (fn: () => Promise<unknown>) => countCommands(counter, fn);
    try {
      const one = await counted(async () => {
        expect((await probe.inject({ url: '/readyz' })).statusCode).toBe(200);
      });
      // One probe (src/dashboard/routes/health.ts, redis/writes.ts): PING, INFO memory, the probe SET.
      expect(one.commands).toBe(3);
      await new Promise((r) => setTimeout(r, READY_PROBE_INTERVAL_MS + 100)); // past the cached answer
      const many = await counted(async () => {
        const answers = await Promise.all(
          Array.from({ length: 300 }, () => probe.inject({ url: '/readyz' })),
        );
        for (const r of answers) expect(r.json()).toEqual({ status: 'ready', redis: 'ok' });
        for (let i = 0; i < 100; i++) expect((await probe.inject({ url: '/readyz' })).statusCode).toBe(200);
      });
      console.log(
        `readyz: one request = ${one.commands} Redis commands; 300 at once, then 100 in a row = ` +
          `${many.commands} in ${Math.round(many.ms)} ms`,
      );
      // Whole probes only, and at most one per READY_PROBE_INTERVAL_MS of the burst (a new probe starts
      // only once the last answer is that old): one, or two should a second have passed meanwhile.
      expect(many.commands % one.commands).toBe(0);
      const probes = many.commands / one.commands;
      expect(probes).toBeGreaterThanOrEqual(1);
      expect(probes).toBeLessThanOrEqual(1 + Math.floor(many.ms / READY_PROBE_INTERVAL_MS));
    } finally {
      counter.disconnect();
      await probe.close();
      await h.close();
      await own.close();
    }
  }, 30_000);

  it('answers a fixed "not reachable" when Redis is down, and logs the detail instead', async () => {
    // A Redis of the test's own, stopped under a running dashboard: the shared one must stay up.
    const own = await startOwnRedis();
    const h = await startHarness({ tag: 'dash-readyz', redisUrl: own.url });
    const probe = await buildDashboard(h.ctx, { bullBoard: false });
    try {
      expect((await probe.inject({ url: '/readyz' })).statusCode).toBe(200);
      await own.stop();
      // The probe's answer is cached for a second (READY_PROBE_INTERVAL_MS): wait for a fresh one.
      await new Promise((r) => setTimeout(r, READY_PROBE_INTERVAL_MS + 100));
      const from = h.logLines.length;
      const r = await probe.inject({ url: '/readyz' });
      expect(r.statusCode).toBe(503);
      expect(r.json()).toEqual({ status: 'unavailable', redis: 'not reachable' });
      // Nothing of the connection's own words: no host, no port, no error text.
      for (const revealing of ['127.0.0.1', String(own.port), 'redis://', 'ECONNREFUSED', 'within'])
        expect(r.body).not.toContain(revealing);
      // The operator finds the detail in the log.
      const logged = h.logLines
        .slice(from)
        .map((l) => JSON.parse(l) as { msg: string; err?: string })
        .filter((l) => l.msg.startsWith('readyz:'));
      expect(logged).toHaveLength(1);
      expect(logged[0]?.err).toBeTruthy();
    } finally {
      await probe.close();
      await own.restart(); // back up, so that the harness can delete its keys and close
      await h.close();
      await own.close();
    }
  }, 30_000);
});
