// The retry an operator can trust, over the JSON API (real Redis, simulator and workers): the dry run
// answers exactly what a retry would touch and changes nothing; a retry of outcomes a retry cannot help
// (or of held learners) is refused without "confirmPermanent"; the answer names the re-queued learners;
// the retried run comes to the top of the runs with "retried N", its counters exact; every operator
// action (retry, release of held learners, pause, resume, limits, urgent moves, the CLI's retry) is in the
// change log with its author; and the change log filters by action, organization and author.
import type { FastifyInstance } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildDashboard } from '../../src/dashboard/server.ts';
import { readChanges } from '../../src/limiter/control-log.ts';
import { newRunId } from '../../src/outcomes/runs.ts';
import { runCommand } from '../helpers/cli.ts';
import {
  authed,
  basic,
  csrfFromPage,
  DASHBOARD_TOKEN,
  drain,
  failureScenario,
  FORBIDDEN,
  MISSING,
  SERVER_ERROR,
  type Scenario,
} from '../helpers/dashboard.ts';

let s: Scenario;
let app: FastifyInstance;

beforeEach(async () => {
  s = await failureScenario();
  app = await buildDashboard(s.h.ctx, { bullBoard: false });
});
afterEach(async () => {
  await app?.close();
  await s?.h.close();
});

const post = async (url: string, body: unknown, user?: string) => {
  const csrf = await csrfFromPage(app);
  return app.inject({
    method: 'POST',
    url,
    headers: {
      ...(user ? basic(DASHBOARD_TOKEN, user) : { authorization: `Bearer ${DASHBOARD_TOKEN}` }),
      'x-csrf-token': csrf,
    },
    payload: body as object,
  });
};
const json = async (url: string) => {
  const r = await authed(app, { url });
  expect(r.statusCode, `${url}: ${r.body}`).toBe(200);
  return r.json();
};

describe('retry: dry run and confirmation', () => {
  it('a dry run answers the count per outcome and what needs confirming, and changes nothing', async () => {
    const r = await post('/api/retry', { all: true, dryRun: true });
    expect(r.statusCode, r.body).toBe(200);
    expect(r.json()).toMatchObject({
      dryRun: true,
      matched: 8,
      requeued: 0,
      byCode: { 'not-found': 2, forbidden: 2, 'server-error': 4 },
      learners: [],
    });
    expect(r.json().confirm.sort()).toEqual(['forbidden', 'not-found']);
    expect(r.json().notes.forbidden).toMatch(/fails the same way unless something changed on the service/);
    // Only server errors: nothing to confirm.
    const plain = (await post('/api/retry', { all: true, code: 'server-error', dryRun: true })).json();
    expect(plain).toMatchObject({ matched: 4, byCode: { 'server-error': 4 }, confirm: [] });
    expect((await json('/api/failures')).total).toBe(8);
    expect(await readChanges(s.h.ctx.redis, s.h.ctx.keys)).toEqual([]);
  });

  it('refuses a retry touching permanent outcomes without confirmPermanent, naming the field and the codes', async () => {
    const r = await post('/api/retry', { all: true });
    expect(r.statusCode).toBe(400);
    expect(r.json().error).toBe('confirm-permanent');
    expect(r.json().message).toMatch(
      /^confirmPermanent: required to retry (2 not-found, 2 forbidden|2 forbidden, 2 not-found)/,
    );
    const one = await post('/api/retry', { learners: [`acme:${MISSING[0]}`, `acme:${SERVER_ERROR[0]}`] });
    expect(one.statusCode).toBe(400);
    expect(one.json().message).toMatch(/1 not-found/);
    // Nothing moved, nothing logged.
    expect((await json('/api/failures')).total).toBe(8);
    expect(await readChanges(s.h.ctx.redis, s.h.ctx.keys)).toEqual([]);
    // With the flag it goes.
    const ok = await post('/api/retry', {
      learners: FORBIDDEN.map((id) => `acme:${id}`),
      confirmPermanent: true,
    });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(ok.json()).toMatchObject({ requeued: 2, byCode: { forbidden: 2 } });
  });

  it('answers the re-queued learners with their attempts, marks the run retried and logs one entry with the author', async () => {
    const r = await post('/api/retry', { all: true, code: 'server-error' }, 'alice');
    expect(r.statusCode, r.body).toBe(200);
    const body = r.json();
    expect(body).toMatchObject({ dryRun: false, requeued: 4, matched: 4, runs: { [s.runId]: 4 } });
    // ATTEMPTS=2 in the scenario: each used both; the next is the third.
    expect(body.learners.map((l: { key: string }) => l.key).sort()).toEqual(
      SERVER_ERROR.map((id) => `acme:${id}`).sort(),
    );
    expect(body.learners.every((l: { attempts: number }) => l.attempts === 2)).toBe(true);
    const states = await json(`/api/learners?ids=${SERVER_ERROR.map((id) => `acme:${id}`).join(',')}`);
    expect(states.learners.map((l: { state: string }) => l.state)).toEqual(SERVER_ERROR.map(() => 'queued'));

    const [entry] = await readChanges(s.h.ctx.redis, s.h.ctx.keys);
    expect(entry).toMatchObject({
      action: 'retry',
      org: 'acme',
      who: 'dashboard:operator/alice@127.0.0.1',
      details: {
        requeued: 4,
        byCode: { 'server-error': 4 },
        runs: { [s.runId]: 4 },
        filter: { code: 'server-error' },
      },
    });
    // No learner ids in the log: counts and the filter.
    expect(Object.keys(entry?.details ?? {}).sort()).toEqual(['byCode', 'filter', 'requeued', 'runs']);
    const run = await json(`/api/runs/${s.runId}`);
    expect(run.retried).toMatchObject({ count: 4, by: 'dashboard:operator/alice@127.0.0.1' });
    // The counters stay exact: the 4 wait again in their own run, the total unchanged.
    expect(run.progress).toEqual({ done: 2, failed: 4, waiting: 4, cancelled: 0, approval: 0, total: 10 });
    await drain(s.h);
    expect((await json(`/api/runs/${s.runId}`)).progress).toEqual({
      done: 6,
      failed: 4,
      waiting: 0,
      cancelled: 0,
      approval: 0,
      total: 10,
    });
  });

  it('a released held learner is logged as held.release, apart from the retries', async () => {
    const held = 4242;
    await s.h.ctx.store.markQueued([
      { org: 'acme', learnerId: held, runId: s.runId, source: 'list', force: false },
    ]);
    await s.h.ctx.store.finish({
      org: 'acme',
      learnerId: held,
      runId: s.runId,
      at: Date.now(),
      attemptId: `check:${s.runId}:${held}`,
      update: { b: 'held', c: 'held', m: 'unknown: not on the list', d: 0, n: 0 },
    });
    const dry = (await post('/api/retry', { all: true, code: 'held', dryRun: true })).json();
    expect(dry).toMatchObject({ matched: 1, confirm: ['held'] });
    expect(dry.notes.held).toMatch(/held on purpose by the pre-flight/);
    expect(
      (await post('/api/retry', { learners: [`acme:${held}`, `acme:${SERVER_ERROR[0]}`] })).statusCode,
    ).toBe(400);
    const r = await post('/api/retry', {
      learners: [`acme:${held}`, `acme:${SERVER_ERROR[0]}`],
      confirmPermanent: true,
    });
    expect(r.json()).toMatchObject({ requeued: 2, byCode: { held: 1, 'server-error': 1 } });
    const changes = await readChanges(s.h.ctx.redis, s.h.ctx.keys);
    expect(changes.map((c) => [c.action, c.details.requeued, c.details.byCode]).sort()).toEqual([
      ['held.release', 1, { held: 1 }],
      ['retry', 1, { 'server-error': 1 }],
    ]);
  });
});

describe('the retried run under Runs', () => {
  it('an old run that is retried is listed first, with who and how many, and its counters stay exact', async () => {
    // Eleven newer runs (created after it, before the retry) push the scenario's run off the overview's ten.
    const created = Date.parse((await s.h.ctx.runs.get(s.runId))?.createdAt ?? '');
    for (let i = 1; i <= 11; i++) {
      const at = new Date(created + i);
      await s.h.ctx.runs.create(
        { id: newRunId(at), kind: 'csv', source: `later-${i}.csv`, orgs: ['acme'] },
        at,
      );
    }
    const before = await json('/api/overview');
    expect(before.runs.map((r: { id: string }) => r.id)).not.toContain(s.runId);
    const r = await post('/api/retry', { all: true, code: 'server-error' });
    expect(r.statusCode, r.body).toBe(200);
    const after = await json('/api/overview');
    expect(after.runs).toHaveLength(10);
    // First: its retry is the newest thing that happened to any run.
    const listed = after.runs[0];
    expect(listed.id).toBe(s.runId);
    expect(listed.retried).toMatchObject({ count: 4, by: 'dashboard:operator@127.0.0.1' });
    expect(listed.progress).toEqual({ done: 2, failed: 4, waiting: 4, cancelled: 0, approval: 0, total: 10 });
    const page = await authed(app, { url: '/' });
    expect(page.body).toMatch(new RegExp(`data-retried="${s.runId}"[^>]*>\\s*retried 4 at`));
    // The failures page's run filter lists it too.
    expect((await authed(app, { url: '/failures' })).body).toContain(`<option value="${s.runId}"`);
  });
});

describe('the change log', () => {
  it('has an entry with its author for every action kind, from the dashboard and the CLI, and filters them', async () => {
    expect((await post('/api/controls/pause', { org: 'acme' }, 'bob')).statusCode).toBe(200);
    expect((await post('/api/controls/resume', { org: 'acme' }, 'bob')).statusCode).toBe(200);
    expect((await post('/api/controls/limits', { org: 'acme', perOrg: '500/4s' }, 'bob')).statusCode).toBe(
      200,
    );
    expect((await post('/api/controls/limits/reset', { org: 'acme' }, 'bob')).statusCode).toBe(200);
    expect((await post('/api/retry', { learners: [`acme:${SERVER_ERROR[0]}`] }, 'bob')).statusCode).toBe(200);
    const urgent = await post(`/api/learners/acme/${SERVER_ERROR[0]}/urgent`, {}, 'bob');
    expect(urgent.statusCode, urgent.body).toBe(200);
    const cli = await runCommand(['retry', '--status', 'server-error'], s.h.env);
    expect(cli.code, cli.stderr).toBe(0);
    const all = await readChanges(s.h.ctx.redis, s.h.ctx.keys);
    const byAction = Object.fromEntries(all.map((c) => [`${c.action} ${c.who.split('@')[0]}`, c.org]));
    expect(byAction).toEqual({
      'pause dashboard:operator/bob': 'acme',
      'resume dashboard:operator/bob': 'acme',
      'limits.set dashboard:operator/bob': 'acme',
      'limits.reset dashboard:operator/bob': 'acme',
      'retry dashboard:operator/bob': 'acme',
      'priority.urgent dashboard:operator/bob': 'acme',
      [`retry ${all.find((c) => c.who.startsWith('cli:'))?.who.split('@')[0]}`]: 'acme',
    });
    const cliEntry = all.find((c) => c.who.startsWith('cli:'));
    expect(cliEntry?.details).toMatchObject({ requeued: 3, filter: { status: 'server-error' } });

    // Filters: action, organization, author; in the URL of the page.
    const retries = await json('/api/changes?action=retry');
    expect(retries.changes.map((c: { who: string }) => c.who.split(':')[0])).toEqual(['cli', 'dashboard']);
    expect(
      (await json('/api/changes?action=limits.')).changes.map((c: { action: string }) => c.action),
    ).toEqual(['limits.reset', 'limits.set']);
    expect((await json('/api/changes?who=cli:')).changes).toHaveLength(1);
    expect((await json('/api/changes?org=beta')).changes).toHaveLength(0);
    expect((await json('/api/changes?limit=2')).older).toBe(all[1]?.id);
    expect(
      (await json(`/api/changes?before=${all[1]?.id}`)).changes.map((c: { id: string }) => c.id),
    ).toEqual(all.slice(2).map((c) => c.id));
    const page = await authed(app, { url: '/changes?action=retry&who=bob' });
    expect(page.statusCode).toBe(200);
    expect(page.body.match(/<tr data-change=/g)).toHaveLength(1);
    expect(page.body).toContain('dashboard:operator/bob@127.0.0.1');
    expect(page.body).toMatch(/re-queued 1 \(1 server-error\)/);
    expect(page.body).toMatch(/<option value="retry"\s+selected>/);
    expect(page.body).toMatch(/<a href="\/changes"[^>]*>Changes<\/a>/);
    // Bad filters name the parameter.
    for (const [q, field] of [
      ['action=DROP%20TABLE', 'action'],
      ['org=a%20b', 'org'],
      ['before=x', 'before'],
      ['limit=0', 'limit'],
    ]) {
      const bad = await authed(app, { url: `/api/changes?${q}` });
      expect(bad.statusCode).toBe(400);
      expect(bad.json().message).toMatch(new RegExp(`^${field}:`));
    }
  });
});
