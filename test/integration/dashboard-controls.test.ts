// The dashboard's live controls, through fastify inject on the
// real app (buildDashboard) over a real Redis (a random prefix, deleted) and the real simulator: pause and
// resume an organization or a token, set and reset its limits; each takes effect in Redis (readPolicy),
// is in the change log exactly once with the dashboard's actor, and a paused organization gets no
// transfer from a running worker until it is resumed. Refused without authentication, without (or with
// a forged) CSRF token and in read-only mode, with nothing written; bad input is a 400 naming the field.
import type { FastifyInstance, InjectOptions } from 'fastify';
import { setLimits } from '../../src/limiter/policy-control.ts';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { dashboardActor, readChanges, type ChangeEntry } from '../../src/limiter/control-log.ts';
import { buildDashboard } from '../../src/dashboard/server.ts';
import { POLICY_RECHECK_MS, readPolicy } from '../../src/limiter/policy.ts';
import { startWorkers } from '../../src/worker/run-workers.ts';
import { authed, basic, bearer, csrfFromPage, DASHBOARD_TOKEN } from '../helpers/dashboard.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';
import { waitFor, waitUntil } from '../helpers/wait.ts';

let h: Harness;
let app: FastifyInstance;
let readOnlyApp: FastifyInstance;
let csrf: string;
let acmeTokens: string[];
let betaToken: string;
/** inject's client address (light-my-request's default remoteAddress). */
const IP = '127.0.0.1';
const ALICE = dashboardActor('alice', IP);

beforeAll(async () => {
  h = await startHarness({
    tag: 'controls',
    sim: { learners: 200 },
    env: {
      DASHBOARD_TOKEN,
      LEARNER_API_TOKENS: 'acme:sim-acme-1,acme:sim-acme-2,beta:sim-beta-1',
      LIMIT_PER_TOKEN: '20/2s',
      LIMIT_PER_ORG: '60/4s',
    },
  });
  acmeTokens = h.config.tokens.filter((t) => t.org === 'acme').map((t) => t.id);
  betaToken = h.config.tokens.find((t) => t.org === 'beta')?.id as string;
  app = await buildDashboard(h.ctx, { bullBoard: false });
  readOnlyApp = await buildDashboard(h.ctx, { bullBoard: false, readOnly: true });
  csrf = await csrfFromPage(app, '/controls');
});
// Each test asserts on the whole change log and policy, which the others change: each starts from the
// state the harness began with (no policy stored, LIMIT_* in force, an empty change log).
beforeEach(async () => {
  await h.ctx.redis.del(h.ctx.keys.changes(), h.ctx.keys.policy('acme'), h.ctx.keys.policy('beta'));
});
afterAll(async () => {
  await app?.close();
  await readOnlyApp?.close();
  await h?.close();
});

/** A POST as alice (basic auth, as a browser sends it) with the page's CSRF token, unless overridden. */
function post(path: string, body: unknown, headers: Record<string, string> = {}, on = app) {
  const opts: InjectOptions = {
    method: 'POST',
    url: `/api/controls/${path}`,
    headers: { ...basic(DASHBOARD_TOKEN, 'alice'), 'x-csrf-token': csrf, ...headers },
    payload: body as InjectOptions['payload'],
  };
  return on.inject(opts);
}

const changes = (org = 'acme'): Promise<ChangeEntry[]> =>
  readChanges(h.ctx.redis, h.ctx.keys, { count: 1000, org });
const policy = (org = 'acme') => readPolicy(h.ctx.redis, h.ctx.keys, org);
/** Everything a refused request could have touched: the policy hashes and the change log. */
const snapshot = async () =>
  JSON.stringify([
    await h.ctx.redis.hgetall(h.ctx.keys.policy('acme')),
    await h.ctx.redis.hgetall(h.ctx.keys.policy('beta')),
    await h.ctx.redis.xlen(h.ctx.keys.changes()),
  ]);

describe('GET /api/controls and /controls', () => {
  it('needs the token; shows per organization its state, limits, tokens ("-" for learned) and changes', async () => {
    expect((await app.inject({ url: '/api/controls' })).statusCode).toBe(401);
    expect((await app.inject({ url: '/controls' })).statusCode).toBe(401);
    const r = await authed(app, { url: '/api/controls' });
    expect(r.statusCode, r.body).toBe(200);
    const c = r.json();
    expect(c.readOnly).toBe(false);
    expect(c.applyWithinMs).toBeLessThanOrEqual(5000);
    expect(c.orgs.map((o: { org: string }) => o.org)).toEqual(['acme', 'beta']);
    const acme = c.orgs[0];
    expect(acme).toMatchObject({ org: 'acme', paused: null, perOrg: '60/4s', perToken: '20/2s', reserve: 0 });
    expect(acme.tokens.map((t: { tokenId: string }) => t.tokenId).sort()).toEqual([...acmeTokens].sort());
    expect(acme.tokens[0]).toMatchObject({ limit: '20/2s', override: false, paused: null });
    expect(acme.changes).toEqual([]);

    const one = await authed(app, { url: '/api/controls?org=beta' });
    expect(one.json().orgs.map((o: { org: string }) => o.org)).toEqual(['beta']);
    const bad = await authed(app, { url: '/api/controls?org=nope' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().message).toMatch(/^org: unknown organization 'nope'/);

    const page = await authed(app, { url: '/controls' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-security-policy']).toContain("script-src 'self'");
    expect(page.body).toContain('<script src="/assets/controls.js" defer></script>');
    expect(page.body).toMatch(/<section class="card controls" data-org="acme" data-paused="false">/);
    expect(page.body).toContain('data-action="pause"');
    expect(page.body).toMatch(/<td data-learned>-<\/td>/);
    expect(page.body).toMatch(/<td data-rate-limited>-<\/td>/);
    expect(page.body).toContain('href="/controls"');
    const js = await authed(app, { url: '/assets/controls.js' });
    expect(js.statusCode).toBe(200);
    expect(js.headers['content-type']).toContain('text/javascript');
  });

  it('read-only: the page shows the state without any control or script', async () => {
    const page = await authed(readOnlyApp, { url: '/controls' });
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('--read-only: the controls are off');
    expect(page.body).not.toContain('data-action=');
    expect(page.body).not.toContain('limits-form');
    expect(page.body).not.toContain('/assets/controls.js');
  });
});

describe('pause and resume', () => {
  it('pauses and resumes the organization: in Redis, once each in the change log, with the dashboard actor', async () => {
    const r = await post('pause', { org: 'acme' });
    expect(r.statusCode, r.body).toBe(200);
    const j = r.json();
    expect(j).toMatchObject({ action: 'pause', org: 'acme', tokenId: null, changed: true });
    expect(j.message).toMatch(/^paused organization 'acme'/);
    expect(j.controls.paused.who).toBe(ALICE);
    expect((await policy()).paused?.who).toBe(ALICE);
    // beta is not touched.
    expect((await policy('beta')).paused).toBeNull();

    // Asked again: nothing changes, nothing logged.
    const again = await post('pause', { org: 'acme' });
    expect(again.json()).toMatchObject({ changed: false, changeId: null });
    expect(again.json().message).toMatch(/already paused by dashboard:operator\/alice@127\.0\.0\.1/);

    // The overview shows it (card and alert).
    const overview = (await authed(app, { url: '/api/overview' })).json();
    expect(overview.alerts).toContainEqual(
      expect.objectContaining({ level: 'warning', org: 'acme', tokenId: null }),
    );
    const page = await authed(app, { url: '/' });
    expect(page.body).toContain('data-org-paused="acme"');
    expect(page.body).toContain(`paused by ${ALICE}`);
    const controlsPage = await authed(app, { url: '/controls?org=acme' });
    expect(controlsPage.body).toMatch(/data-org="acme" data-paused="true"/);
    expect(controlsPage.body).toContain('data-action="resume"');

    const resumed = await post('resume', { org: 'acme' });
    expect(resumed.statusCode, resumed.body).toBe(200);
    expect(resumed.json()).toMatchObject({ action: 'resume', changed: true });
    expect(resumed.json().message).toMatch(
      /^resumed organization 'acme' \(paused by dashboard:operator\/alice/,
    );
    expect((await policy()).paused).toBeNull();
    expect((await post('resume', { org: 'acme' })).json()).toMatchObject({ changed: false });

    const log = await changes();
    expect(log.map((e) => [e.action, e.who, e.tokenId])).toEqual([
      ['resume', ALICE, null],
      ['pause', ALICE, null],
    ]);
    // Each change is in the log once: the stream holds exactly these two entries.
    expect(await h.ctx.redis.xlen(h.ctx.keys.changes())).toBe(2);
    expect(log[1]?.details).toMatchObject({ before: { paused: null }, after: { paused: { who: ALICE } } });
  });

  it('pauses and resumes one token; the actor of a Bearer request has no user name', async () => {
    const [token] = acmeTokens as [string];
    const before = await h.ctx.redis.xlen(h.ctx.keys.changes());
    const r = await post('pause', { org: 'acme', token }, { authorization: `Bearer ${DASHBOARD_TOKEN}` });
    expect(r.statusCode, r.body).toBe(200);
    const who = dashboardActor(undefined, IP);
    expect((await policy()).pausedTokens[token]?.who).toBe(who);
    expect((await policy()).paused).toBeNull();
    const view = await h.ctx.budget.peek('acme', acmeTokens);
    expect(view.tokens.find((t) => t.tokenId === token)?.paused?.who).toBe(who);
    const row = r.json().controls.tokens.find((t: { tokenId: string }) => t.tokenId === token);
    expect(row.paused.who).toBe(who);

    expect((await post('resume', { org: 'acme', token })).statusCode).toBe(200);
    expect((await policy()).pausedTokens).toEqual({});
    const log = (await changes()).slice(0, 2);
    expect(log.map((e) => [e.action, e.who, e.tokenId])).toEqual([
      ['resume', ALICE, token],
      ['pause', who, token],
    ]);
    expect(await h.ctx.redis.xlen(h.ctx.keys.changes())).toBe(before + 2);
  });

  it('a paused organization gets no transfer from a running worker; after resume its learners go through', async () => {
    const ids = learnersNotIn('acme', 6, 100);
    expect((await post('pause', { org: 'acme' })).statusCode).toBe(200);
    await h.enqueueIds(ids);
    const sent = () => h.sim.record.filter((x) => x.method === 'PATCH' && x.org === 'acme').length;
    const sentBefore = sent();
    const workers = startWorkers(h.ctx, { orgs: ['acme'], concurrency: 3, untilIdle: false });
    try {
      // The worker asked and was refused for the pause (it says so), not merely not started yet.
      await waitUntil("the worker's note that acme is paused", () =>
        h.logLines.some((l) => l.includes("organization 'acme' is paused")),
      );
      expect(sent()).toBe(sentBefore);
      expect((await post('resume', { org: 'acme' })).statusCode).toBe(200);
      const resumedAt = Date.now();
      await waitFor(
        "the paused learners' records to be 'transferred'",
        () => Promise.all(ids.map(async (id) => (await h.ctx.store.get('acme', id))?.b)),
        (states) => states.every((b) => b === 'transferred'),
        { everyMs: 100 },
      );
      const patches = h.sim.record.filter((x) => x.method === 'PATCH' && x.org === 'acme').slice(sentBefore);
      const first = Math.min(...patches.map((x) => x.receivedAt));
      console.log(`controls: transfers went on ${first - resumedAt} ms after the dashboard's resume`);
      // Nothing was sent before the resume, and a worker asleep on the pause asks again within
      // POLICY_RECHECK_MS (src/limiter/policy.ts: a change applies within 5 s): 5x headroom on that.
      expect(first).toBeGreaterThanOrEqual(resumedAt);
      expect(first - resumedAt).toBeLessThan(5 * POLICY_RECHECK_MS);
    } finally {
      await workers.stop();
    }
  });
});

describe('limits', () => {
  it('sets the default per token, one token own limit, the organization and a reserve; resets to LIMIT_*', async () => {
    const [token] = acmeTokens as [string];
    const start = await h.ctx.redis.xlen(h.ctx.keys.changes());

    const a = await post('limits', { org: 'acme', perToken: '5/2s' });
    expect(a.statusCode, a.body).toBe(200);
    expect(a.json()).toMatchObject({ action: 'limits.set', changed: true, tokenId: null });
    expect(a.json().message).toContain('perToken 20/2s -> 5/2s');
    expect((await policy()).perToken).toEqual({ max: 5, windowMs: 2000 });

    const b = await post('limits', { org: 'acme', perToken: '3/1s', token });
    expect(b.statusCode, b.body).toBe(200);
    expect((await policy()).tokens[token]).toEqual({ max: 3, windowMs: 1000 });
    const row = b.json().controls.tokens.find((t: { tokenId: string }) => t.tokenId === token);
    expect(row).toMatchObject({ limit: '3/1s', override: true });

    const c = await post('limits', { org: 'acme', perOrg: '40/4s', reserve: '25%' });
    expect(c.statusCode, c.body).toBe(200);
    const p = await policy();
    expect(p.perOrg).toEqual({ max: 40, windowMs: 4000 });
    expect(p.reserve).toBe(10);
    expect(c.json().controls).toMatchObject({ perOrg: '40/4s', reserve: 10, reserveShare: '25%' });

    // The same values again: nothing changes, nothing logged.
    expect((await post('limits', { org: 'acme', perToken: '5/2s' })).json()).toMatchObject({
      changed: false,
    });

    const w = await post('limits', { org: 'acme', reserve: 40 });
    expect(w.statusCode, w.body).toBe(200);
    expect(w.json().warnings[0]).toMatch(/leaves nothing of 40\/4s to this tool/);

    const r = await post('limits/reset', { org: 'acme' });
    expect(r.statusCode, r.body).toBe(200);
    expect(r.json()).toMatchObject({ action: 'limits.reset', changed: true });
    const reset = await policy();
    expect(reset).toMatchObject({
      perOrg: { max: 60, windowMs: 4000 },
      perToken: { max: 20, windowMs: 2000 },
      tokens: {},
      reserve: 0,
    });

    const log = (await changes()).slice(0, 5).reverse();
    expect(log.map((e) => [e.action, e.who, e.tokenId])).toEqual([
      ['limits.set', ALICE, null],
      ['limits.set', ALICE, token],
      ['limits.set', ALICE, null],
      ['limits.set', ALICE, null],
      ['limits.reset', ALICE, null],
    ]);
    expect(await h.ctx.redis.xlen(h.ctx.keys.changes())).toBe(start + 5);
    expect(log[0]?.details).toEqual({
      before: expect.objectContaining({ perToken: '20/2s' }),
      after: expect.objectContaining({ perToken: '5/2s' }),
    });

    // The page lists them newest first, at most 20.
    const c2 = (await authed(app, { url: '/api/controls?org=acme' })).json().orgs[0];
    expect(c2.changes[0]).toMatchObject({ action: 'limits.reset', who: ALICE });
    expect(c2.changes[0].summary).toContain('perOrg 40/4s -> 60/4s');
    expect(c2.changes.length).toBeLessThanOrEqual(20);
    const page = await authed(app, { url: '/controls?org=acme' });
    expect(page.body).toContain('<td data-change-action>limits.reset</td>');
  });

  it('shows pacing and a closed run window on the overview, as `limits set` stored them', async () => {
    const fallback = { limitPerToken: h.config.limitPerToken, limitPerOrg: h.config.limitPerOrg };
    // A window that opened and closed an hour ago (UTC): closed now, opens again tomorrow.
    const hhmm = (ms: number) => new Date(ms).toISOString().slice(11, 16);
    const windows = `all ${hhmm(Date.now() - 2 * 3_600_000)}-${hhmm(Date.now() - 3_600_000)}`;
    await setLimits(
      h.ctx.redis,
      h.ctx.keys,
      'acme',
      { burst: { count: 5 }, runWindow: { windows, tz: 'UTC' } },
      fallback,
      ALICE,
    );
    const page = await authed(app, { url: '/' });
    expect(page.body).toMatch(
      /data-pacing="acme">pacing: the organization 5 at once, then one every 67 ms; each token 5 at once, then one every 100 ms/,
    );
    expect(page.body).toContain('data-open="no"');
    expect(page.body).toMatch(/waiting for the run window, opens \w{3} \d\d:\d\d UTC/);
    const overview = (await authed(app, { url: '/api/overview' })).json();
    const acme = overview.orgs.find((o: { org: string }) => o.org === 'acme');
    expect(acme.runWindow).toMatchObject({ windows, tz: 'UTC', open: false });
    expect(acme.budget.tokens[0].pace).toMatchObject({ burst: 5, intervalMs: 100 });
  });

  it('shows at most the newest 20 changes', async () => {
    for (let i = 0; i < 12; i++) {
      expect((await post(i % 2 ? 'resume' : 'pause', { org: 'beta' })).statusCode).toBe(200);
    }
    const beta = (await authed(app, { url: '/api/controls?org=beta' })).json().orgs[0];
    const all = await changes('beta');
    expect(all).toHaveLength(12);
    expect(beta.changes.map((e: ChangeEntry) => e.id)).toEqual(all.map((e) => e.id));
    for (let i = 0; i < 10; i++) await post(i % 2 ? 'resume' : 'pause', { org: 'beta' });
    const more = (await authed(app, { url: '/api/controls?org=beta' })).json().orgs[0];
    expect(more.changes).toHaveLength(20);
    expect(more.changes[0].id).toBe((await changes('beta'))[0]?.id);
  });
});

describe('secrets', () => {
  it('no API token and no dashboard token in the pages, the answers or the change log', async () => {
    const secrets = ['sim-acme-1', 'sim-acme-2', 'sim-beta-1', DASHBOARD_TOKEN];
    const bodies = [
      (await authed(app, { url: '/controls' })).body,
      (await authed(readOnlyApp, { url: '/controls' })).body,
      (await authed(app, { url: '/api/controls' })).body,
      (await post('pause', { org: 'acme', token: acmeTokens[1] })).body,
      (await post('resume', { org: 'acme', token: acmeTokens[1] })).body,
      (await post('limits', { org: 'acme', perToken: 'nope' })).body,
      JSON.stringify(await h.ctx.redis.xrange(h.ctx.keys.changes(), '-', '+')),
    ];
    for (const body of bodies) for (const secret of secrets) expect(body).not.toContain(secret);
  });
});

describe('refusals: nothing is written', () => {
  const requests: Array<[string, unknown]> = [
    ['pause', { org: 'acme' }],
    ['resume', { org: 'acme' }],
    ['limits', { org: 'acme', perToken: '1/2s' }],
    ['limits/reset', { org: 'acme' }],
  ];

  it('without authentication: 401', async () => {
    const before = await snapshot();
    for (const [path, body] of requests) {
      const r = await app.inject({
        method: 'POST',
        url: `/api/controls/${path}`,
        headers: { 'x-csrf-token': csrf },
        payload: body as InjectOptions['payload'],
      });
      expect(r.statusCode, path).toBe(401);
      const wrong = await post(path, body, basic('not-the-token-000000', 'alice'));
      expect(wrong.statusCode, path).toBe(401);
    }
    expect(await snapshot()).toBe(before);
  });

  it('without a CSRF token, or with a forged one: 403 csrf', async () => {
    const before = await snapshot();
    for (const [path, body] of requests) {
      const none = await app.inject({
        method: 'POST',
        url: `/api/controls/${path}`,
        headers: bearer,
        payload: body as InjectOptions['payload'],
      });
      expect(none.statusCode, path).toBe(403);
      expect(none.json().error).toBe('csrf');
      const forged = await post(path, body, { 'x-csrf-token': `${Date.now()}.forged-mac` });
      expect(forged.statusCode, path).toBe(403);
      expect(forged.json().error).toBe('csrf');
    }
    expect(await snapshot()).toBe(before);
  });

  it('in read-only mode: 403 read-only, even with the token and a valid CSRF token', async () => {
    const before = await snapshot();
    const roCsrf = await csrfFromPage(readOnlyApp, '/controls');
    for (const [path, body] of requests) {
      const r = await post(path, body, { 'x-csrf-token': roCsrf }, readOnlyApp);
      expect(r.statusCode, path).toBe(403);
      expect(r.json()).toMatchObject({ error: 'read-only' });
    }
    expect(await snapshot()).toBe(before);
  });

  it('bad input: 400 naming the field', async () => {
    const before = await snapshot();
    const cases: Array<[string, unknown, RegExp]> = [
      ['limits', { org: 'acme', perToken: '25/2x' }, /^perToken: expected N\/DURATION .*got '25\/2x'/],
      ['limits', { org: 'acme', perOrg: '0/1d' }, /^perOrg: expected N\/DURATION/],
      ['limits', { org: 'acme', perOrg: 100 }, /^perOrg: .*got 100/],
      ['limits', { org: 'acme', reserve: '120%' }, /^reserve: .*got '120%'/],
      ['limits', { org: 'acme', reserve: -1 }, /^reserve: /],
      ['limits', { org: 'acme', perToken: '5/2s', token: 'zzz' }, /^token: expected a token id/],
      ['limits', { org: 'acme', perToken: '5/2s', token: betaToken }, /^token: .* is not a token of 'acme'/],
      ['limits', { org: 'acme', token: acmeTokens[0] }, /^perToken: required with token/],
      ['limits', { org: 'acme' }, /^perOrg, perToken, reserve: give at least one/],
      ['limits', { org: 'acme', perorg: '5/2s' }, /^perorg: unknown field/],
      ['limits', { perToken: '5/2s' }, /^org: required/],
      ['limits/reset', { org: 'nope' }, /^org: unknown organization 'nope'/],
      ['pause', { org: 'acme', token: 'zzz' }, /^token: /],
      ['pause', { org: 7 }, /^org: expected an organization key/],
      ['pause', {}, /^org: required/],
      ['resume', [], /^body: expected a JSON object/],
    ];
    for (const [path, body, message] of cases) {
      const r = await post(path, body);
      expect(r.statusCode, `${path} ${JSON.stringify(body)}: ${r.body}`).toBe(400);
      expect(r.json().error).toBe('bad-request');
      expect(r.json().message, JSON.stringify(body)).toMatch(message);
    }
    // No body at all.
    const empty = await app.inject({
      method: 'POST',
      url: '/api/controls/pause',
      headers: { ...bearer, 'x-csrf-token': csrf },
    });
    expect(empty.statusCode).toBe(400);
    expect(empty.json().message).toMatch(/^body: /);
    expect(await snapshot()).toBe(before);
  });
});
