// The viewer token (DASHBOARD_READ_TOKEN) on the same dashboard as the operator's: it sees every page
// with no button that changes anything, and every state-changing route refuses it (403 `viewer`),
// bull-board's included, with or without a CSRF token; nothing changes. The config refuses a viewer
// token without the operator's, or the same value for both. Real Redis and simulator, fastify inject.
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/core/config.ts';
import { buildDashboard } from '../../src/dashboard/server.ts';
import { readChanges } from '../../src/limiter/control-log.ts';
import {
  basic,
  bearer,
  csrfFromPage,
  DASHBOARD_TOKEN,
  failureScenario,
  SERVER_ERROR,
  type Scenario,
} from '../helpers/dashboard.ts';

const READ_TOKEN = 'view-only-9876543210fedcba';
const viewer = { authorization: `Bearer ${READ_TOKEN}` };

let s: Scenario;
let app: FastifyInstance;

beforeAll(async () => {
  s = await failureScenario({ env: { DASHBOARD_READ_TOKEN: READ_TOKEN } });
  app = await buildDashboard(s.h.ctx, {});
});
afterAll(async () => {
  await app?.close();
  await s?.h.close();
});

/**
 * Every route of the app with a state-changing method, from fastify's own route tree (so a route added
 * later is covered without editing this list): [method, path with its parameters filled in].
 */
function stateChangingRoutes(tree: string): [string, string][] {
  const out: [string, string][] = [];
  const stack: string[] = [];
  for (const line of tree.split('\n')) {
    const m = /^([\s│]*)[├└]── (\S*)(?: \(([^)]*)\))?/.exec(line);
    if (!m) continue;
    const depth = (m[1] ?? '').length / 4;
    stack.length = depth;
    stack.push(m[2] ?? '');
    const methods = (m[3] ?? '').split(',').map((x) => x.trim());
    const path = stack
      .join('')
      .replace(/:queueName/g, encodeURIComponent('transfers acme'))
      .replace(/:org/g, 'acme')
      .replace(/:id/g, String(SERVER_ERROR[0]))
      .replace(/:[A-Za-z]+/g, 'x');
    for (const method of methods)
      if (['POST', 'PUT', 'DELETE', 'PATCH'].includes(method)) out.push([method, path]);
  }
  return out;
}

describe('the viewer token', () => {
  it('sees every page, with no button that changes anything, and says it is a viewer', async () => {
    const pages = [
      '/',
      '/failures',
      '/failures?code=forbidden',
      `/learners/acme/${SERVER_ERROR[0]}`,
      '/controls',
      '/changes',
    ];
    for (const url of pages) {
      const r = await app.inject({ url, headers: viewer });
      expect(r.statusCode, url).toBe(200);
      expect(r.body, url).toContain('data-read-only="true"');
      expect(r.body, url).toMatch(/<span class="badge" id="role-badge">viewer<\/span>/);
      // The only buttons left are the filter forms' (a GET): none posts anything.
      const buttons = [...r.body.matchAll(/<button[^>]*>([\s\S]*?)<\/button>/g)].map((b) =>
        (b[1] ?? '').trim(),
      );
      expect(
        buttons.filter((b) => b !== 'filter'),
        url,
      ).toEqual([]);
      for (const marker of ['retry-one', 'name="learner"', 'limits-form', 'id="move-ahead"', 'controls.js'])
        expect(r.body, `${url}: ${marker}`).not.toContain(marker);
    }
    // The operator, for contrast, gets the buttons on the same dashboard.
    const op = await app.inject({ url: '/failures', headers: bearer });
    expect(op.body).toContain('id="retry-all"');
    expect(op.body).not.toContain('id="role-badge"');
    // The JSON API reads work, and the controls say the caller may not act.
    expect((await app.inject({ url: '/api/failures', headers: viewer })).statusCode).toBe(200);
    expect((await app.inject({ url: '/api/controls', headers: viewer })).json().readOnly).toBe(true);
    expect((await app.inject({ url: '/queues/', headers: viewer })).statusCode).toBe(200);
  });

  it('is refused every state-changing route, bull-board included, with 403 viewer, and nothing changes', async () => {
    const routes = stateChangingRoutes(app.printRoutes({ commonPrefix: false }));
    const paths = routes.map(([m, p]) => `${m} ${p}`);
    // The routes this test must cover are among them (a route tree that failed to parse would list none).
    for (const must of [
      'POST /api/retry',
      'POST /api/approve',
      `POST /api/learners/acme/${SERVER_ERROR[0]}/urgent`,
      'POST /api/controls/pause',
      'POST /api/controls/resume',
      'POST /api/controls/limits',
      'POST /api/controls/limits/reset',
      'PUT /queues/api/queues/pause',
    ])
      expect(paths).toContain(must);
    expect(routes.filter(([, p]) => p.startsWith('/queues/')).length).toBeGreaterThan(10);
    const csrf = await csrfFromPage(app);
    const bodies: Record<string, object> = {
      '/api/retry': { all: true, code: 'server-error' },
      '/api/controls/pause': { org: 'acme' },
      '/api/controls/limits': { org: 'acme', perOrg: '1/4s' },
      '/api/controls/limits/reset': { org: 'acme' },
    };
    for (const [method, url] of routes) {
      for (const headers of [
        { ...viewer, 'x-csrf-token': csrf },
        { ...basic(READ_TOKEN, 'carol'), 'x-csrf-token': csrf },
        viewer,
      ]) {
        const r = await app.inject({
          method: method as 'POST',
          url,
          headers,
          payload: bodies[url] ?? {},
        });
        expect(r.statusCode, `${method} ${url}`).toBe(403);
        expect(r.json(), `${method} ${url}`).toMatchObject({ error: 'viewer' });
        expect(r.json().message).toMatch(/viewer token \(DASHBOARD_READ_TOKEN\).*act with DASHBOARD_TOKEN/);
      }
    }
    expect((await app.inject({ url: '/api/failures?code=server-error', headers: bearer })).json().total).toBe(
      SERVER_ERROR.length,
    );
    expect(await readChanges(s.h.ctx.redis, s.h.ctx.keys)).toEqual([]);
    // The same request with the operator's token goes through.
    const ok = await app.inject({
      method: 'POST',
      url: '/api/retry',
      headers: { ...basic(DASHBOARD_TOKEN, 'dave'), 'x-csrf-token': csrf },
      payload: { all: true, code: 'server-error', dryRun: true },
    });
    expect(ok.statusCode, ok.body).toBe(200);
  });

  it('counts as a good login for the throttle; a wrong token is still a failure', async () => {
    for (let i = 0; i < 3; i++) {
      const bad = await app.inject({
        url: '/',
        headers: { authorization: 'Bearer not-a-token-at-all-000' },
        remoteAddress: '10.9.9.9',
      });
      expect(bad.statusCode).toBe(401);
    }
    const good = await app.inject({ url: '/', headers: viewer, remoteAddress: '10.9.9.9' });
    expect(good.statusCode).toBe(200);
    for (let i = 0; i < 5; i++)
      await app.inject({
        url: '/',
        headers: { authorization: 'Bearer not-a-token-at-all-000' },
        remoteAddress: '10.9.9.8',
      });
    // Throttled: even the viewer token waits.
    expect((await app.inject({ url: '/', headers: viewer, remoteAddress: '10.9.9.8' })).statusCode).toBe(429);
  });

  it('never shows the tokens: not in pages, answers or the change log', async () => {
    for (const url of ['/', '/failures', '/controls', '/changes', '/api/controls', '/api/changes']) {
      const r = await app.inject({ url, headers: viewer });
      expect(r.body).not.toContain(READ_TOKEN);
      expect(r.body).not.toContain(DASHBOARD_TOKEN);
    }
  });
});

describe('DASHBOARD_READ_TOKEN in the config', () => {
  const env = { REDIS_URL: 'redis://127.0.0.1:6379', LEARNER_API_TOKENS: 'acme:t0k3n-acme' };
  it('needs DASHBOARD_TOKEN, a different value, and the same strength; the messages show neither value', () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ DASHBOARD_READ_TOKEN: READ_TOKEN }, /- DASHBOARD_READ_TOKEN: needs DASHBOARD_TOKEN beside it/],
      [
        { DASHBOARD_READ_TOKEN: READ_TOKEN, DASHBOARD_TOKEN: READ_TOKEN },
        /- DASHBOARD_READ_TOKEN, DASHBOARD_TOKEN: the same value/,
      ],
      [
        { DASHBOARD_READ_TOKEN: 'short', DASHBOARD_TOKEN },
        /- DASHBOARD_READ_TOKEN: expected at least 16 characters/,
      ],
      [{ DASHBOARD_READ_TOKEN: 'abababababababababab', DASHBOARD_TOKEN }, /- DASHBOARD_READ_TOKEN: too weak/],
    ];
    for (const [extra, message] of cases) {
      let thrown: unknown;
      try {
        loadConfig({ ...env, ...extra });
      } catch (err) {
        thrown = err;
      }
      expect(thrown, JSON.stringify(Object.keys(extra))).toBeInstanceOf(Error);
      const text = (thrown as Error).message;
      expect(text).toMatch(new RegExp(message.source, 'm'));
      expect(text).not.toContain(READ_TOKEN);
      expect(text).not.toContain(DASHBOARD_TOKEN);
    }
    const ok = loadConfig({ ...env, DASHBOARD_TOKEN, DASHBOARD_READ_TOKEN: READ_TOKEN });
    expect(ok.dashboardReadToken).toBe(READ_TOKEN);
    expect(JSON.stringify(ok)).not.toContain(READ_TOKEN);
  });
});
