// The approve button's route (POST /api/approve): the operator's dry run tells the dialog how many wait,
// the approval releases them with the dashboard's author in the change log; the viewer token and a
// --read-only dashboard are refused and nothing moves. The run's card shows the canary in words and the
// button to operators only. Real Redis and simulator, fastify inject.
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDashboard } from '../../src/dashboard/server.ts';
import { readChanges } from '../../src/limiter/control-log.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';
import { bearer, csrfFromPage, DASHBOARD_TOKEN } from '../helpers/dashboard.ts';
import { enqueueCsv } from '../../src/queue/enqueue-csv.ts';

const READ_TOKEN = 'view-only-approve-0123456789';
const viewer = { authorization: `Bearer ${READ_TOKEN}` };

let h: Harness;
let app: FastifyInstance;
let readOnly: FastifyInstance;
let runId: string;

beforeAll(async () => {
  h = await startHarness({
    tag: 'dash-approve',
    env: { DASHBOARD_TOKEN, DASHBOARD_READ_TOKEN: READ_TOKEN },
  });
  runId = 'canary-dash-1';
  await h.ctx.runs.create({
    id: runId,
    kind: 'csv',
    source: 'canary.csv',
    orgs: ['acme'],
    canary: { size: 2, autoApprove: false, approved: {}, refused: {} },
  });
  const file = h.writeFile('canary.csv', `learnerId\n${learnersNotIn('acme', 6).join('\n')}\n`);
  await enqueueCsv(
    { producer: h.ctx.producer.withDefaults({ canary: 2 }), runs: h.ctx.runs },
    { file, defaultOrg: 'acme', knownOrgs: h.config.orgs, runId, rejectsFile: h.writeFile('r.csv', '') },
  );
  await h.workUntilIdle();
  app = await buildDashboard(h.ctx, {});
  readOnly = await buildDashboard(h.ctx, { readOnly: true });
});
afterAll(async () => {
  await app?.close();
  await readOnly?.close();
  await h?.close();
});

describe('POST /api/approve', () => {
  it('shows the canary and the button to operators, not to viewers', async () => {
    const page = await app.inject({ url: '/', headers: bearer });
    expect(page.body).toContain('waiting for approval after its canary (2 of 2 transferred, 0 failed)');
    expect(page.body).toContain(`class="approve-run" data-run="${runId}"`);
    const seen = await app.inject({ url: '/', headers: viewer });
    expect(seen.body).toContain('waiting for approval after its canary (2 of 2 transferred, 0 failed)');
    expect(seen.body).not.toContain('approve-run');
  });

  it('is refused to the viewer token and on a --read-only dashboard: nothing moves', async () => {
    const csrf = await csrfFromPage(app);
    const r = await app.inject({
      method: 'POST',
      url: '/api/approve',
      headers: { ...viewer, 'x-csrf-token': csrf },
      payload: { run: runId },
    });
    expect(r.statusCode).toBe(403);
    const ro = await readOnly.inject({
      method: 'POST',
      url: '/api/approve',
      headers: { ...bearer, 'x-csrf-token': await csrfFromPage(readOnly) },
      payload: { run: runId },
    });
    expect(ro.statusCode).toBeGreaterThanOrEqual(400);
    expect((await h.ctx.store.runCounts('acme', runId))['awaiting-approval']).toBe(4);
  });

  it("the operator's dry run counts, the approval releases and is logged with its author", async () => {
    const csrf = await csrfFromPage(app);
    const post = (payload: object) =>
      app.inject({
        method: 'POST',
        url: '/api/approve',
        headers: { ...bearer, 'x-csrf-token': csrf },
        payload,
      });
    const dry = await post({ run: runId, dryRun: true });
    expect(dry.json()).toMatchObject({ dryRun: true, matched: 4, byCode: { 'awaiting approval': 4 } });
    expect((await h.ctx.store.runCounts('acme', runId))['awaiting-approval']).toBe(4);
    const done = await post({ run: runId });
    expect(done.json()).toMatchObject({ released: 4, byOrg: { acme: 4 } });
    const [change] = await readChanges(h.ctx.redis, h.ctx.keys, { count: 1, action: 'run.approve' });
    expect(change?.who).toMatch(/^dashboard:/);
    expect((await post({ run: 'no-such-run' })).statusCode).toBe(400);
    await h.workUntilIdle();
    expect(await h.ctx.store.runCounts('acme', runId)).toMatchObject({ transferred: 6 });
  });
});
