// One learner-id rule and one run-id rule, the same at every door. A learner the CSV
// queues, the dashboard serves (learner 2^53-1 once answered 400: it could not be seen, retried or moved
// ahead). A run id is 1-64 letters, digits, '-' and '_': `enqueue --run '../../x y'` once wrote its
// rejects outside out/ and Redis keys under that id. Runs stored by an earlier release, under any id,
// stay readable. Bad values: a usage error naming the flag and the value (exit 2), or a 400 naming the
// field.
import { mkdirSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../src/cli/shared.ts';
import { buildDashboard } from '../../src/dashboard/server.ts';
import { isRunId } from '../../src/core/ids.ts';
import { scanKeys } from '../../src/redis/client.ts';
import { newRunId } from '../../src/outcomes/runs.ts';
import { type CliResult, runCommand, runCli } from '../helpers/cli.ts';
import { authed, basic, DASHBOARD_TOKEN } from '../helpers/dashboard.ts';
import { startHarness, type Harness } from '../helpers/pipeline.ts';

const BIG = Number.MAX_SAFE_INTEGER; // 9007199254740991
const LEARNER_RULE = 'a learner id (a whole number from 1 to 9007199254740991)';
const RUN_RULE = "a run id (1 to 64 letters, digits, '-' and '_')";
/** A run id an earlier release took (`enqueue --run 'cohort 1.0: spring'`): a space, a dot, a colon. */
const LEGACY_RUN = 'cohort 1.0: spring';
const STACK = /\n\s+at .+:\d+:\d+/;

let h: Harness;
let app: FastifyInstance;

beforeAll(async () => {
  h = await startHarness({ tag: 'ids', env: { DASHBOARD_TOKEN } });
  app = await buildDashboard(h.ctx, { bullBoard: false });
  // The earlier release's run, written as it wrote runs (Runs.create now refuses such an id), with one
  // learner recorded under it.
  await h.ctx.redis.hset(h.ctx.keys.run(LEGACY_RUN), {
    createdAt: new Date().toISOString(),
    kind: 'csv',
    source: 'spring.csv',
    orgs: 'acme',
  });
  await h.ctx.redis.zadd(h.ctx.keys.runs(), Date.now(), LEGACY_RUN);
  await h.ctx.store.markQueued([
    { org: 'acme', learnerId: 77, runId: LEGACY_RUN, source: 'spring.csv:2', force: false },
  ]);
});
afterAll(async () => {
  await app?.close();
  await h?.close();
});

async function csrfOf(url: string): Promise<string> {
  const page = await authed(app, { url });
  const m = /<meta name="csrf-token" content="([^"]+)"/.exec(page.body);
  if (!m?.[1]) throw new Error(`no csrf-token meta in ${url} (status ${page.statusCode})`);
  return m[1];
}

describe('learner ids: the rule the CSV uses, in the dashboard and its API', () => {
  it('learner 9007199254740991, queued from a CSV, can be seen, found, moved ahead and retried', async () => {
    const { runId, summary } = await h.enqueueIds([BIG]);
    expect(summary.enqueued).toBe(1);

    const api = await authed(app, { url: `/api/learners/acme/${BIG}` });
    expect(api.statusCode, api.body).toBe(200);
    expect(api.json().learner).toMatchObject({ org: 'acme', learnerId: BIG, state: 'queued', runId });

    const page = await authed(app, { url: `/learners/acme/${BIG}` });
    expect(page.statusCode, page.body.slice(0, 300)).toBe(200);
    expect(page.body).toContain(String(BIG));
    expect(page.body).toContain('Move ahead of the queue');

    const found = await authed(app, { url: `/api/failures?q=${BIG}` });
    expect(found.statusCode, found.body).toBe(200);

    const csrf = await csrfOf(`/learners/acme/${BIG}`);
    const headers = { ...basic(DASHBOARD_TOKEN, 'ops-ids'), 'x-csrf-token': csrf };
    const ahead = await app.inject({ method: 'POST', url: `/api/learners/acme/${BIG}/urgent`, headers });
    expect(ahead.statusCode, ahead.body).toBe(200);

    const retry = await app.inject({
      method: 'POST',
      url: '/api/retry',
      headers,
      payload: { learners: [`acme:${BIG}`] },
    });
    // Waiting, not failed: nothing to retry, but the id is taken.
    expect(retry.statusCode, retry.body).toBe(200);
  });

  it('an id the CSV refuses is a 400 that names the field and the value', async () => {
    const cases: [string, string][] = [
      [`/api/learners/acme/${BIG + 1}`, `learner id: expected ${LEARNER_RULE}, got '9007199254740992'`],
      ['/api/learners/acme/0', `learner id: expected ${LEARNER_RULE}, got '0'`],
      ['/api/learners/acme/1e3', `learner id: expected ${LEARNER_RULE}, got '1e3'`],
      ['/api/failures?q=-4', `q (learner id): expected ${LEARNER_RULE}, got '-4'`],
    ];
    for (const [url, message] of cases) {
      const r = await authed(app, { url });
      expect(r.statusCode, `${url}: ${r.body}`).toBe(400);
      expect(r.json(), url).toEqual({ error: 'bad-request', message });
    }
  });
});

describe('run ids: one rule for new runs; stored runs stay readable', () => {
  it('the ids the tool makes fit the rule; a run is never created under an id that does not', async () => {
    for (let i = 0; i < 50; i++) expect(isRunId(newRunId(new Date(Date.now() + i * 997_000)))).toBe(true);
    for (const bad of ['../../x y', 'a:b', 'a.b', '', 'x'.repeat(65), 'run\n1', 'ö'])
      expect(isRunId(bad), bad).toBe(false);
    await expect(h.ctx.runs.create({ id: '../../x y', kind: 'csv', source: 's', orgs: [] })).rejects.toThrow(
      `run id: expected ${RUN_RULE}, got '../../x y'`,
    );
    expect(await h.ctx.runs.exists('../../x y')).toBe(false);
  });

  it('the dashboard reads a stored run of an earlier release, and answers 400 naming the field for other ids', async () => {
    const run = encodeURIComponent(LEGACY_RUN);
    const one = await authed(app, { url: `/api/runs/${run}` });
    expect(one.statusCode, one.body).toBe(200);
    expect(one.json()).toMatchObject({ id: LEGACY_RUN });
    const failures = await authed(app, { url: `/api/failures?run=${run}` });
    expect(failures.statusCode, failures.body).toBe(200);
    const learner = await authed(app, { url: '/api/learners/acme/77' });
    expect(learner.json().learner).toMatchObject({ runId: LEGACY_RUN });

    const bad = encodeURIComponent('../../x y');
    const filter = await authed(app, { url: `/api/failures?run=${bad}` });
    expect(filter.statusCode, filter.body).toBe(400);
    expect(filter.json().message).toBe(
      `run: expected ${RUN_RULE} or the id of a stored run, got '../../x y'`,
    );
    const path = await authed(app, { url: `/api/runs/${bad}` });
    expect(path.statusCode, path.body).toBe(400);
    expect(path.json().message).toContain("run id: expected a run id (1 to 64 letters, digits, '-' and '_')");
    // An id that fits but names no run is still a 404.
    expect((await authed(app, { url: '/api/runs/nope-0000' })).statusCode).toBe(404);
  });
});

describe('the CLI: every flag that takes a learner id or a run id', () => {
  function filesUnder(root: string): string[] {
    return readdirSync(root, { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => relative(root, join(e.parentPath, e.name)));
  }

  it("`enqueue --run '../../x y'` is refused with exit 2 and writes nothing, in files or in Redis", async () => {
    // The command runs two levels down a directory of its own: '../../x y' from there stays inside it.
    const root = mkdtempSync(join(tmpdir(), 'lt-ids-'));
    const cwd = join(root, 'a', 'b');
    mkdirSync(cwd, { recursive: true });
    // A bad row too, so that a run that went through would write its rejects file.
    const csv = h.writeFile('escape.csv', 'learnerId\n4242\nnot-a-number\n');
    const r = await runCli(
      ['enqueue', '--csv', csv, '--org', 'acme', '--run', '../../x y'],
      h.env,
      60_000,
      cwd,
    );
    const where = `exit ${r.code}\n${r.stdout}\n${r.stderr}`;
    expect(r.code, where).toBe(EXIT.usage);
    expect(r.stderr, where).toContain(`--run expects ${RUN_RULE}, got '../../x y'`);
    expect(r.stderr, where).not.toMatch(STACK);
    expect(filesUnder(root)).toEqual([]);
    expect(await h.ctx.runs.exists('../../x y')).toBe(false);
    expect(await h.ctx.store.get('acme', 4242)).toBeUndefined();
    const keys: string[] = [];
    for await (const batch of scanKeys(h.ctx.redis, `${h.prefix}:*x y*`)) keys.push(...batch);
    expect(keys).toEqual([]);
  });

  it('names the flag and the value; exit 2, no stack', async () => {
    const csv = h.writeFile('one.csv', 'learnerId\n5\n');
    const cases: [string[], string][] = [
      [['enqueue', '--csv', csv, '--org', 'acme', '--run', 'a:b'], `--run expects ${RUN_RULE}, got 'a:b'`],
      [
        ['reconcile', '--desired', csv, '--org', 'acme', '--run', 'x'.repeat(65)],
        `--run expects ${RUN_RULE}`,
      ],
      [
        ['report', '--run', '../../x y'],
        `--run expects ${RUN_RULE} or the id of a stored run, got '../../x y'`,
      ],
      [
        ['audit', '--run', 'no such/run'],
        `--run expects ${RUN_RULE} or the id of a stored run, got 'no such/run'`,
      ],
      [['retry', '--run', 'a.b'], `--run expects ${RUN_RULE} or the id of a stored run, got 'a.b'`],
      [['audit', '--learner', String(BIG + 1)], `--learner expects ${LEARNER_RULE}, got '9007199254740992'`],
      [['retry', '--learner', '0'], `--learner expects ${LEARNER_RULE}, got '0'`],
    ];
    const results: CliResult[] = [];
    for (let i = 0; i < cases.length; i += 3)
      results.push(...(await Promise.all(cases.slice(i, i + 3).map(([args]) => runCommand(args, h.env)))));
    cases.forEach(([args, says], i) => {
      const r = results[i] as CliResult;
      const where = `${args.join(' ')}: exit ${r.code}\n${r.stderr}`;
      expect(r.code, where).toBe(EXIT.usage);
      expect(r.stderr, where).toContain(says);
      expect(r.stderr, where).not.toMatch(STACK);
    });
  }, 120_000);

  it('report, audit and retry still read a run an earlier release stored under an id that does not fit', async () => {
    const [report, audit, retry] = await Promise.all([
      runCommand(['report', '--run', LEGACY_RUN, '--org', 'acme'], h.env),
      runCommand(['audit', '--run', LEGACY_RUN], h.env),
      runCommand(['retry', '--run', LEGACY_RUN], h.env),
    ]);
    for (const r of [report, audit, retry]) expect(r.code, r.stderr).toBe(EXIT.ok);
    expect(report.stdout).toContain(`acme,77,`);
    expect(report.stdout).toContain(LEGACY_RUN);
    expect(retry.stdout).toContain('re-queued 0 learners');
  }, 120_000);
});
