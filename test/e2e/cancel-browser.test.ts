// Withdrawing from the dashboard, in a real browser (the system Chromium through playwright-core) and
// through its API: a run card's "withdraw the learners not called yet" and a learner page's "withdraw this
// learner" ask in the in-page dialog with the exact count (the server's dry run), then the learners are
// recorded cancelled with the dashboard's author and leave the queue; the viewer sees no such button and
// its POST is refused; a --read-only dashboard refuses it too. Never skips: a browser that cannot launch
// fails it.
import type { FastifyInstance } from 'fastify';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDashboard } from '../../src/dashboard/server.ts';
import { readChanges } from '../../src/limiter/control-log.ts';
import { jobIdOf } from '../../src/queue/job.ts';
import { launchChromium, pageAs, POLL } from '../helpers/browser.ts';
import {
  basic,
  csrfFromPage,
  DASHBOARD_TOKEN,
  failureScenario,
  type Scenario,
} from '../helpers/dashboard.ts';
import { learnersNotIn } from '../helpers/pipeline.ts';

const READ_TOKEN = 'view-only-9876543210fedcba';

let s: Scenario;
let app: FastifyInstance;
let base: string;
let browser: Browser;
/** A run of 12 learners nobody works on: all of them wait. */
let waitingRun: string;
let waiting: number[];

beforeAll(async () => {
  s = await failureScenario({ env: { DASHBOARD_READ_TOKEN: READ_TOKEN } });
  waiting = learnersNotIn('acme', 12, 100);
  waitingRun = (await s.h.enqueueIds(waiting)).runId;
  app = await buildDashboard(s.h.ctx, { liveIntervalMs: 300 });
  base = (await app.listen({ port: 0, host: '127.0.0.1' })).replace(/\/$/, '');
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await app?.close();
  await s?.h.close();
});

async function signedIn(user: string, password: string) {
  const { context, page, errors } = await pageAs(browser, user, password, { width: 1400, height: 900 });
  return { page, errors, close: () => context.close() };
}

describe('cancel from the dashboard', () => {
  it('the viewer sees no withdraw button and its POST is refused', async () => {
    const { page, close } = await signedIn('someone', READ_TOKEN);
    try {
      await page.goto(`${base}/`);
      await page.locator(`section[data-run="${waitingRun}"]`).waitFor(POLL);
      expect(await page.locator('button.cancel-run').count()).toBe(0);
      await page.goto(`${base}/learners/acme/${waiting[0]}`);
      expect(await page.locator('button.cancel-one').count()).toBe(0);
    } finally {
      await close();
    }
    const csrf = await csrfFromPage(app);
    const refused = await app.inject({
      method: 'POST',
      url: '/api/cancel',
      headers: { ...basic(READ_TOKEN, 'someone'), 'x-csrf-token': csrf },
      payload: { run: waitingRun },
    });
    expect(refused.statusCode).toBe(403);
    expect(refused.json()).toMatchObject({ error: 'viewer' });
    expect((await s.h.ctx.store.get('acme', waiting[0] as number))?.b).toBe('queued');
  });

  it('one learner: the dialog says 1, the page shows it cancelled, its job leaves the queue', async () => {
    const id = waiting[0] as number;
    const { page, errors, close } = await signedIn('alice', DASHBOARD_TOKEN);
    try {
      await page.goto(`${base}/learners/acme/${id}`);
      await page.click('button.cancel-one');
      const dialog = page.locator('dialog#retry-dialog[open]');
      await dialog.waitFor(POLL);
      expect(await dialog.locator('#retry-dialog-summary').textContent()).toBe(
        'cancel 1 learner: 1 not called yet',
      );
      await page.click('#retry-dialog-go');
      await expect.poll(() => page.locator('#cancel-result').textContent(), POLL).toBe('withdrew 1 learner');
      expect(await page.locator('main > p [data-state]').textContent()).toBe('cancelled');
      expect(errors).toEqual([]);
    } finally {
      await close();
    }
    const r = await s.h.ctx.store.get('acme', id);
    expect(r?.b).toBe('cancelled');
    expect(await s.h.ctx.queues.get('acme').getJob(jobIdOf(id))).toBeUndefined();
  });

  it("a run: the dialog gives the count of learners not called yet; dismissed, nothing changes; confirmed, they are cancelled by the dashboard's author", async () => {
    const { page, errors, close } = await signedIn('alice', DASHBOARD_TOKEN);
    try {
      await page.goto(`${base}/`);
      const card = page.locator(`section[data-run="${waitingRun}"]`);
      await card.locator('button.cancel-run').click();
      const dialog = page.locator('dialog#retry-dialog[open]');
      await dialog.waitFor(POLL);
      expect(await dialog.locator('#retry-dialog-summary').textContent()).toBe(
        'cancel 11 learners: 11 not called yet',
      );
      await page.click('#retry-dialog-cancel');
      await expect
        .poll(() => card.locator('[data-cancel-result]').textContent(), POLL)
        .toBe('nothing withdrawn');
      expect((await s.h.ctx.store.runCounts('acme', waitingRun)).queued).toBe(11);

      await card.locator('button.cancel-run').click();
      await dialog.waitFor(POLL);
      await page.click('#retry-dialog-go');
      await expect
        .poll(() => card.locator('[data-cancel-result]').textContent(), POLL)
        .toBe('withdrew 11 learners');
      // The run's progress follows live: every learner of it is cancelled now.
      await expect.poll(() => card.locator('[data-k="cancelled"]').first().textContent(), POLL).toBe('12');
      expect(errors).toEqual([]);
    } finally {
      await close();
    }
    const counts = await s.h.ctx.store.runCounts('acme', waitingRun);
    expect(counts.cancelled).toBe(12);
    expect(counts.queued ?? 0).toBe(0);
    const [entry] = await readChanges(s.h.ctx.redis, s.h.ctx.keys, { count: 1 });
    expect(entry).toMatchObject({ action: 'cancel', org: 'acme' });
    expect(entry?.who).toMatch(/^dashboard:operator\/alice@/);
    expect(entry?.details).toMatchObject({ cancelled: 11, filter: `run ${waitingRun}` });
  });

  it('a --read-only dashboard refuses the cancel API', async () => {
    const ro = await buildDashboard(s.h.ctx, { readOnly: true });
    try {
      const csrf = await csrfFromPage(ro);
      const r = await ro.inject({
        method: 'POST',
        url: '/api/cancel',
        headers: { authorization: `Bearer ${DASHBOARD_TOKEN}`, 'x-csrf-token': csrf },
        payload: { run: waitingRun, dryRun: true },
      });
      expect(r.statusCode).toBe(403);
      expect(r.json()).toMatchObject({ error: 'read-only' });
      const bad = await app.inject({
        method: 'POST',
        url: '/api/cancel',
        headers: { authorization: `Bearer ${DASHBOARD_TOKEN}`, 'x-csrf-token': await csrfFromPage(app) },
        payload: { runs: waitingRun },
      });
      expect(bad.statusCode).toBe(400);
      expect(bad.json().message).toContain('"run"');
    } finally {
      await ro.close();
    }
  });
});
