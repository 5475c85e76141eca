// The dashboard's pages and JSON API over a real run with failures (real Redis, real simulator, real
// workers), through fastify inject: overview, failures with every filter and pagination, the learner
// page with its audit record, and retry one / selected / all matching ending in `transferred`.
import type { FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildDashboard } from '../../src/dashboard/server.ts';
import type { LearnerOutcome } from '../../src/outcomes/record.ts';
import {
  authed,
  csrfFromPage,
  drain,
  failureScenario,
  FORBIDDEN,
  MISSING,
  SERVER_ERROR,
  TRANSFERRED,
  type Scenario,
} from '../helpers/dashboard.ts';

// One run with failures that the reading tests share; a test that writes (the escaping test, each retry)
// gets a run of its own, so that no test's counts depend on which tests ran before it.
let s: Scenario;
let app: FastifyInstance;
let shared: { s: Scenario; app: FastifyInstance };

async function openScenario(): Promise<{ s: Scenario; app: FastifyInstance }> {
  const scenario = await failureScenario();
  return { s: scenario, app: await buildDashboard(scenario.h.ctx, { bullBoard: false }) };
}

async function closeScenario(x: { s: Scenario; app: FastifyInstance } | undefined): Promise<void> {
  await x?.app.close();
  await x?.s.h.close();
}

/** Points the tests at a scenario: the shared one, or a test's own. */
function use(x: { s: Scenario; app: FastifyInstance }): void {
  s = x.s;
  app = x.app;
}

beforeAll(async () => {
  shared = await openScenario();
});
beforeEach(() => use(shared));
afterAll(async () => {
  await closeScenario(shared);
});

const json = async (url: string) => {
  const r = await authed(app, { url });
  expect(r.statusCode, `${url}: ${r.body}`).toBe(200);
  return r.json();
};

describe('overview', () => {
  it('GET /api/overview: per-run and per-org progress, outcome counts, budgets, ETA, hourly counts', async () => {
    const o = await json('/api/overview');
    const run = o.runs.find((r: { id: string }) => r.id === s.runId);
    expect(run.progress).toEqual({ done: 2, failed: 8, waiting: 0, cancelled: 0, approval: 0, total: 10 });
    expect(run.counts).toMatchObject({ transferred: 2, forbidden: 2, 'not-found': 2, 'server-error': 4 });
    expect(run.byOrg.acme.progress.failed).toBe(8);
    const acme = o.orgs.find((x: { org: string }) => x.org === 'acme');
    expect(acme.progress).toMatchObject({ done: 2, failed: 8, waiting: 0 });
    expect(acme.budget.tokens).toHaveLength(2);
    expect(acme.budget.org.limit).toBe(60);
    expect(acme.eta.text).toBe('nothing left');
    // Sparse: only the hours that recorded something (this one), not 24 buckets mostly empty.
    expect(acme.hourly).toHaveLength(1);
    expect(acme.hourly[0].hour).toBe(new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000).toISOString());
    const thisHour = acme.hourly[0].counts;
    // Every recorded outcome counted: 2 transferred, 2 forbidden, 2 not-found, 4 x 2 attempts of 500.
    expect(thisHour).toMatchObject({ transferred: 2, forbidden: 2, 'not-found': 2, 'server-error': 8 });
    expect(o.alerts).toEqual([]);
  });

  it('GET / renders progress bars, counts, the chart and links for each run and org', async () => {
    const r = await authed(app, { url: '/' });
    expect(r.statusCode).toBe(200);
    expect(r.headers['content-type']).toContain('text/html');
    expect(r.headers['content-security-policy']).toContain("script-src 'self'");
    expect(r.body).toContain(`data-run="${s.runId}"`);
    expect(r.body).toContain('data-progress="org:acme"');
    expect(r.body).toContain('<b data-k="failed">8</b>');
    expect(r.body).toContain('transfers per hour, last 24 h (2 transferred');
    expect(r.body).toContain(`href="/failures?run=${s.runId}"`);
    expect(r.body).not.toMatch(/<script>(?!<\/script>)/); // no inline script: only /assets/app.js
    // The card says each thing once: all done, "nothing left" is its finish line alone (the ETA line
    // under it does not repeat it; the chart's accessible title and description are not read text).
    const card = /<section class="card" data-org="acme"[\s\S]*?<\/section>/.exec(r.body)?.[0] ?? '';
    const shown = card.replace(/<svg[\s\S]*?<\/svg>/g, '').replace(/<[^>]+>/g, ' ');
    expect(shown.split('nothing left')).toHaveLength(2);
    expect(card).toMatch(/<span data-finish="org:acme">nothing left<\/span>/);
    expect(card).toMatch(/<p class="muted small" data-eta="acme"><\/p>/);
  });

  it('GET /api/runs and /api/runs/:id', async () => {
    const list = await json('/api/runs');
    expect(list.runs.map((r: { id: string }) => r.id)).toContain(s.runId);
    const one = await json(`/api/runs/${s.runId}`);
    expect(one.progress.total).toBe(10);
    expect((await authed(app, { url: '/api/runs/nope-0000' })).statusCode).toBe(404);
  });
});

describe('failures', () => {
  it('lists every failure with code, HTTP status, message, attempts and time', async () => {
    const p = await json('/api/failures');
    expect(p.total).toBe(8);
    const byId = new Map<number, LearnerOutcome>(p.items.map((l: LearnerOutcome) => [l.learnerId, l]));
    expect([...byId.keys()].sort((a, b) => a - b)).toEqual([...FORBIDDEN, ...SERVER_ERROR, ...MISSING]);
    const e = byId.get(SERVER_ERROR[0] as number);
    expect(e).toMatchObject({
      state: 'server-error',
      httpStatus: 500,
      attempts: 2,
      org: 'acme',
      runId: s.runId,
    });
    expect(e?.message).toBeTruthy();
    expect(Date.parse(e?.updatedAt ?? '')).toBeGreaterThan(Date.now() - 600_000);
    expect(byId.get(FORBIDDEN[0] as number)).toMatchObject({
      state: 'forbidden',
      httpStatus: 403,
      attempts: 1,
    });
    expect(byId.get(MISSING[0] as number)).toMatchObject({ state: 'not-found', httpStatus: 404 });
  });

  it('filters by code, organization, run and learner id', async () => {
    const byCode = await json('/api/failures?code=server-error');
    expect(byCode.total).toBe(4);
    expect(byCode.items.every((l: LearnerOutcome) => l.state === 'server-error')).toBe(true);
    expect(
      (await json(`/api/failures?run=${s.runId}&code=forbidden`)).items
        .map((l: LearnerOutcome) => l.learnerId)
        .sort(),
    ).toEqual(FORBIDDEN);
    expect((await json('/api/failures?run=20000101T000000-0000')).total).toBe(0);
    expect((await json('/api/failures?org=acme')).total).toBe(8);
    const one = await json(`/api/failures?q=${FORBIDDEN[0]}`);
    expect(one.total).toBe(1);
    expect(one.items[0].learnerId).toBe(FORBIDDEN[0]);
    expect((await json(`/api/failures?q=${TRANSFERRED[0]}`)).total).toBe(0); // not a failure
  });

  it('paginates: pages of 3 cover the 8 failures once each, with a run filter too', async () => {
    for (const extra of ['', `&run=${s.runId}`]) {
      const seen: number[] = [];
      for (let offset = 0; offset < 9; offset += 3) {
        const p = await json(`/api/failures?limit=3&offset=${offset}${extra}`);
        expect(p.total).toBe(8);
        seen.push(...p.items.map((l: LearnerOutcome) => l.learnerId));
      }
      expect(seen).toHaveLength(8);
      expect(new Set(seen).size).toBe(8);
    }
  });

  it('refuses bad filters with a 400 that names the parameter', async () => {
    for (const [url, word] of [
      ['/api/failures?code=transferred', 'code'],
      ['/api/failures?org=nowhere', 'org'],
      ['/api/failures?q=abc', 'q'],
      ['/api/failures?limit=100000', 'limit'],
      ['/api/failures?offset=-1', 'offset'],
      ['/api/failures?run=%3Cx%3E', 'run'],
    ] as const) {
      const r = await authed(app, { url });
      expect(r.statusCode, url).toBe(400);
      expect(r.json().message).toContain(word);
    }
  });

  it('GET /failures renders the table with filters, counts per code, checkboxes and retry buttons', async () => {
    const r = await authed(app, { url: '/failures?code=server-error&limit=2' });
    expect(r.statusCode).toBe(200);
    expect(r.body).toContain('<b id="total">4</b>');
    expect(r.body).toMatch(/<option value="server-error"\s+selected>/);
    expect(r.body.match(/<tr data-learner="acme:\d+">/g)).toHaveLength(2);
    expect(r.body).toContain('name="learner" value="acme:');
    expect(r.body).toContain('id="retry-all"');
    expect(r.body).toContain('rel="next"');
    expect(r.body).toContain('HTTP');
  });

  it('escapes every value: a service message with markup stays text', async () => {
    const own = await openScenario();
    use(own);
    try {
      await escapesEveryValue();
    } finally {
      await closeScenario(own);
    }
  });
});

async function escapesEveryValue(): Promise<void> {
  await s.h.ctx.store.markQueued([
    { org: 'acme', learnerId: 777, runId: s.runId, source: 'x<b>', force: false },
  ]);
  await s.h.ctx.store.recordAttempt('acme', 777, s.runId, {
    bucket: 'invalid-request',
    code: 'invalid-request',
    status: 422,
    error: '<img src=x onerror=alert(1)>',
    message: '<script>alert("x")</script>',
    durationMs: 5,
    countsAsAttempt: true,
  });
  const page = await authed(app, { url: '/failures?code=invalid-request' });
  expect(page.body).toContain('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;');
  expect(page.body).toContain('&lt;img src=x onerror=alert(1)&gt;');
  expect(page.body).not.toContain('<script>alert');
  expect(page.body).not.toContain('<img src=x');
  const learner = await authed(app, { url: '/learners/acme/777' });
  expect(learner.body).toContain('x&lt;b&gt;');
  expect(learner.body).not.toContain('<script>alert');
}

describe('learner', () => {
  it('GET /api/learners/:org/:id: the record, its attempts and the audit record of the transfer', async () => {
    const id = TRANSFERRED[0] as number;
    const r = await json(`/api/learners/acme/${id}`);
    expect(r.learner).toMatchObject({ learnerId: id, state: 'transferred', attempts: 1 });
    expect(r.learner.history).toHaveLength(1);
    const sim = s.h.sim.transfersOf(id)[0];
    expect(r.audit).toHaveLength(1);
    expect(r.audit[0].transferId).toBe(sim?.data.transferDetails.transferId);
    expect(r.audit[0].result).toEqual(JSON.parse(JSON.stringify(sim?.data)));
  });

  it('GET /learners/:org/:id shows the timeline and groups removed / added, authorizations revoked', async () => {
    const id = TRANSFERRED[0] as number;
    const data = s.h.sim.transfersOf(id)[0]?.data;
    const r = await authed(app, { url: `/learners/acme/${id}` });
    expect(r.statusCode).toBe(200);
    expect(r.body).toContain('<ol class="timeline">');
    expect(r.body).toContain(`<b>groups removed</b> (${data?.learnerGroups.removed.length})`);
    expect(r.body).toContain(`<b>groups added</b> (${data?.learnerGroups.added.length})`);
    expect(r.body).toContain(`<b>authorizations revoked</b> (${data?.authorizations.revoked.length})`);
    for (const a of data?.authorizations.revoked ?? []) expect(r.body).toContain(a.email);
    expect(r.body).not.toContain('retry this learner'); // a success is not retryable
    const failed = await authed(app, { url: `/learners/acme/${SERVER_ERROR[0]}` });
    expect(failed.body).toContain('retry this learner');
    expect(failed.body.match(/<li>\s*<time>/g)).toHaveLength(2);
  });

  it('answers 404 for an unknown learner and 400 for a bad id or organization', async () => {
    expect((await authed(app, { url: '/learners/acme/123456' })).statusCode).toBe(404);
    expect((await authed(app, { url: '/api/learners/acme/123456' })).json().error).toBe('not-found');
    expect((await authed(app, { url: '/learners/acme/abc' })).statusCode).toBe(400);
    expect((await authed(app, { url: '/api/learners/nowhere/2' })).statusCode).toBe(400);
  });

  it('GET /api/learners?ids= gives the state of many learners (for following retried rows)', async () => {
    const r = await json(`/api/learners?ids=acme:${TRANSFERRED[0]},acme:${FORBIDDEN[0]},acme:424242`);
    expect(r.learners.map((l: LearnerOutcome) => [l.learnerId, l.state])).toEqual([
      [TRANSFERRED[0], 'transferred'],
      [FORBIDDEN[0], 'forbidden'],
    ]);
    expect((await authed(app, { url: '/api/learners' })).statusCode).toBe(400);
    expect((await authed(app, { url: '/api/learners?ids=acme-2' })).statusCode).toBe(400);
  });
});

describe('retry', () => {
  let own: { s: Scenario; app: FastifyInstance } | undefined;
  beforeEach(async () => {
    own = await openScenario();
    use(own);
  });
  afterEach(async () => {
    await closeScenario(own);
    own = undefined;
  });

  const retry = async (body: unknown) => {
    const csrf = await csrfFromPage(app);
    return authed(app, {
      method: 'POST',
      url: '/api/retry',
      headers: { 'x-csrf-token': csrf },
      payload: body as object,
    });
  };

  it('retries one learner: back to waiting, then transferred', async () => {
    const id = SERVER_ERROR[0] as number;
    const r = await retry({ learners: [`acme:${id}`] });
    expect(r.statusCode, r.body).toBe(200);
    expect(r.json()).toMatchObject({ requeued: 1, byOrg: { acme: 1 }, skipped: [] });
    expect((await json(`/api/learners?ids=acme:${id}`)).learners[0].state).toBe('queued');
    expect((await json('/api/overview')).runs[0].progress.waiting).toBe(1);
    await drain(s.h);
    expect((await s.h.ctx.store.get('acme', id))?.b).toBe('transferred');
  });

  it('retries the selected learners and reports the ones that are not failures', async () => {
    const id = SERVER_ERROR[1] as number;
    const r = await retry({ learners: [`acme:${id}`, `acme:${TRANSFERRED[0]}`] });
    expect(r.json().requeued).toBe(1);
    expect(r.json().skipped).toEqual([
      {
        org: 'acme',
        learnerId: TRANSFERRED[0],
        reason: 'state is transferred, not a failure matching the filter',
      },
    ]);
    await drain(s.h);
    expect((await s.h.ctx.store.get('acme', id))?.b).toBe('transferred');
  });

  it('retries everything a filter matches, and only that', async () => {
    expect((await json('/api/failures?code=server-error')).total).toBe(SERVER_ERROR.length);
    const r = await retry({ all: true, code: 'server-error', run: s.runId });
    expect(r.json().requeued).toBe(SERVER_ERROR.length);
    expect((await json('/api/failures?code=server-error')).total).toBe(0);
    expect((await json('/api/failures?code=forbidden')).total).toBe(2); // untouched
    await drain(s.h);
    for (const id of SERVER_ERROR)
      expect((await s.h.ctx.store.get('acme', id))?.b, `learner ${id}`).toBe('transferred');
    const run = (await json(`/api/runs/${s.runId}`)).progress;
    // 2 transferred and the 4 retried done; 2 forbidden and 2 not-found still failed.
    expect(run).toMatchObject({ done: 6, waiting: 0, failed: 4 });
  });

  it('retries by learner id search, and refuses a bad body', async () => {
    // forbidden: a retry cannot help unless the service changed, so it takes confirmPermanent
    // (retry-confirm.test.ts tests the rule closely).
    const refused = await retry({ all: true, q: String(FORBIDDEN[0]) });
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error).toBe('confirm-permanent');
    const r = await retry({ all: true, q: String(FORBIDDEN[0]), confirmPermanent: true });
    expect(r.json()).toMatchObject({ requeued: 1, byOrg: { acme: 1 } });
    await drain(s.h);
    expect((await s.h.ctx.store.get('acme', FORBIDDEN[0] as number))?.b).toBe('forbidden'); // still refused
    for (const bad of [
      {},
      { learners: [] },
      { learners: ['nowhere:1'] },
      { all: false },
      { all: true, code: 'x' },
    ]) {
      expect((await retry(bad)).statusCode, JSON.stringify(bad)).toBe(400);
    }
  });
});
