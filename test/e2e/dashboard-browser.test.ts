// The dashboard in a real browser (the system Chromium through playwright-core): open the dashboard of a
// run with failures, filter by code, retry everything that matches, and watch the learners go back to
// waiting and on to `transferred` without a reload, on the failures page and on the live overview.
// Saves a screenshot to test-results/dashboard.png (to docs/dashboard.png, the README's, with
// UPDATE_SCREENSHOTS=1). A browser that cannot launch fails this test: it never skips.
import { mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Browser } from 'playwright-core';
import { launchChromium, POLL } from '../helpers/browser.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDashboard } from '../../src/dashboard/server.ts';
import { startWorkers, type WorkHandle } from '../../src/worker/run-workers.ts';
import { ROOT } from '../helpers/cli.ts';
import {
  DASHBOARD_TOKEN,
  failureScenario,
  FORBIDDEN,
  SERVER_ERROR,
  type Scenario,
} from '../helpers/dashboard.ts';

let s: Scenario;
let app: FastifyInstance;
let base: string;
let browser: Browser;
let workers: WorkHandle;

beforeAll(async () => {
  s = await failureScenario();
  app = await buildDashboard(s.h.ctx, { liveIntervalMs: 300 });
  base = (await app.listen({ port: 0, host: '127.0.0.1' })).replace(/\/$/, '');
  // Workers keep running, as in production: a retry from the page is picked up at once.
  workers = startWorkers(s.h.ctx, { orgs: ['acme'], concurrency: 5, untilIdle: false });
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await workers?.stop();
  await app?.close();
  await s?.h.close();
});

describe('dashboard in Chromium', () => {
  it('filter by code, retry all matching, and see the learners become transferred', async () => {
    const context = await browser.newContext({
      httpCredentials: { username: 'operator', password: DASHBOARD_TOKEN },
      viewport: { width: 1280, height: 900 },
    });
    const errors: string[] = [];
    try {
      const overview = await context.newPage();
      overview.on('pageerror', (e) => errors.push(e.message));
      await overview.goto(`${base}/`);
      const runDone = overview.locator(`[data-progress="run:${s.runId}"] [data-k="done"]`);
      await expect.poll(() => runDone.textContent(), POLL).toBe('2');

      const page = await context.newPage();
      page.on('pageerror', (e) => errors.push(e.message));
      page.on('dialog', (d) => void d.accept());
      await page.goto(`${base}/failures`);
      expect(await page.locator('#total').textContent()).toBe('8');
      mkdirSync(join(ROOT, 'test-results'), { recursive: true });
      const shot = process.env.UPDATE_SCREENSHOTS
        ? join(ROOT, 'docs', 'dashboard.png')
        : join(ROOT, 'test-results', 'dashboard.png');
      await page.screenshot({ path: shot, fullPage: true });
      expect(statSync(shot).size).toBeGreaterThan(10_000);

      await page.selectOption('select[name="code"]', 'server-error');
      await page.click('form.filters button[type="submit"]');
      await page.waitForURL(/code=server-error/);
      const states = page.locator('tbody [data-state]');
      expect(await page.locator('#total').textContent()).toBe('4');
      expect(await states.allTextContents()).toEqual(SERVER_ERROR.map(() => 'server-error'));

      await page.click('#retry-all');
      // The confirmation in the page (retry-browser.test.ts tests it closely).
      await page.click('#retry-dialog-go');
      await expect.poll(() => page.locator('#retry-result').textContent(), POLL).toMatch(/^re-queued 4 /);
      await expect.poll(() => states.allTextContents(), POLL).toEqual(SERVER_ERROR.map(() => 'transferred'));
      expect(await states.count()).toBe(4);

      // The overview follows without a reload (server-sent events).
      await expect.poll(() => runDone.textContent(), POLL).toBe('6');
      expect(await overview.locator(`[data-progress="run:${s.runId}"] [data-k="failed"]`).textContent()).toBe(
        '4',
      );

      // The service agrees: each learner changed owner exactly once.
      for (const id of SERVER_ERROR) {
        expect((await s.h.ctx.store.get('acme', id))?.b).toBe('transferred');
        expect(s.h.sim.ownerChanges(id)).toBe(1);
      }
      // Failures of another code were left alone.
      for (const id of FORBIDDEN) expect((await s.h.ctx.store.get('acme', id))?.b).toBe('forbidden');
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('retries one learner from its own page, and fits a phone screen', async () => {
    const context = await browser.newContext({
      httpCredentials: { username: 'operator', password: DASHBOARD_TOKEN },
      viewport: { width: 390, height: 844 },
      isMobile: true,
    });
    try {
      const page = await context.newPage();
      await page.goto(`${base}/failures?code=forbidden`);
      // No sideways scrolling of the page itself: wide tables scroll inside their own box.
      const overflow = Number(
        await page.evaluate('document.documentElement.scrollWidth - window.innerWidth'),
      );
      expect(overflow).toBeLessThanOrEqual(1);
      await page.click(`a[href="/learners/acme/${FORBIDDEN[0]}"]`);
      await page.waitForURL(new RegExp(`/learners/acme/${FORBIDDEN[0]}$`));
      expect(await page.locator('ol.timeline li').count()).toBe(1);
      await page.click('button.retry-one');
      // forbidden: a retry fails the same way unless the service changed, so it asks explicitly.
      await page.check('#retry-anyway');
      await page.click('#retry-dialog-go');
      await expect.poll(() => page.locator('#retry-result').textContent(), POLL).toMatch(/^re-queued 1 /);
      // The simulator still forbids this learner: it goes through waiting and back to forbidden.
      await expect
        .poll(async () => (await s.h.ctx.store.get('acme', FORBIDDEN[0] as number))?.a, POLL)
        .toBe(2);
      await expect.poll(() => page.locator('main > p [data-state]').textContent(), POLL).toBe('forbidden');
    } finally {
      await context.close();
    }
  });
});
