// The retry flow and the viewer token in a real browser (the system Chromium through playwright-core):
// a bulk retry asks in an in-page dialog with the exact count and outcomes (the server's dry run), the rows
// show "queued" and the attempt to come at once and then their new outcome live; outcomes a retry cannot
// help need the explicit "retry anyway" before the button works; the viewer token sees no button and its
// POSTs are refused; bull-board's page links back to the dashboard. Never skips: a browser that cannot
// launch fails it.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDashboard } from '../../src/dashboard/server.ts';
import { readChanges } from '../../src/limiter/control-log.ts';
import { startWorkers } from '../../src/worker/run-workers.ts';
import { launchChromium, pageAs, POLL } from '../helpers/browser.ts';
import { ROOT } from '../helpers/cli.ts';
import {
  DASHBOARD_TOKEN,
  failureScenario,
  FORBIDDEN,
  MISSING,
  SERVER_ERROR,
  TRANSFERRED,
  type Scenario,
} from '../helpers/dashboard.ts';

const READ_TOKEN = 'view-only-9876543210fedcba';

let s: Scenario;
let app: FastifyInstance;
let base: string;
let browser: Browser;

beforeAll(async () => {
  s = await failureScenario({ env: { DASHBOARD_READ_TOKEN: READ_TOKEN } });
  app = await buildDashboard(s.h.ctx, { liveIntervalMs: 300 });
  base = (await app.listen({ port: 0, host: '127.0.0.1' })).replace(/\/$/, '');
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await app?.close();
  await s?.h.close();
});

const as = (username: string, password: string) => pageAs(browser, username, password);

const rowOf = (page: Page, id: number) => page.locator(`tr[data-learner="acme:${id}"]`);

describe('retry in Chromium', () => {
  it('a bulk retry asks with the count and outcomes; the rows show queued and the attempt to come at once, then transferred live', async () => {
    const { context, page, errors } = await as('operator', DASHBOARD_TOKEN);
    try {
      await page.goto(`${base}/failures?code=server-error`);
      await page.click('#retry-all');
      const dialog = page.locator('dialog#retry-dialog[open]');
      await dialog.waitFor(POLL);
      expect(await dialog.locator('#retry-dialog-summary').textContent()).toBe(
        'retry 4 learners: 4 server-error',
      );
      expect(await dialog.locator('#retry-anyway').count()).toBe(0);
      // Cancel: nothing happens.
      await page.click('#retry-dialog-cancel');
      await expect.poll(() => page.locator('#retry-result').textContent(), POLL).toBe('retry cancelled');
      expect(await page.locator('dialog#retry-dialog').count()).toBe(0);
      expect((await s.h.ctx.store.get('acme', SERVER_ERROR[0] as number))?.b).toBe('server-error');

      await page.click('#retry-all');
      await page.click('#retry-dialog-go');
      await expect
        .poll(() => page.locator('#retry-result').textContent(), POLL)
        .toBe(`re-queued 4 (4 server-error) into run ${s.runId}`);
      // At once, from the POST's answer (no worker runs yet): queued, and the third attempt to come.
      for (const id of SERVER_ERROR) {
        expect(await rowOf(page, id).locator('[data-state]').textContent()).toBe('queued');
        expect(await rowOf(page, id).locator('[data-attempts]').textContent()).toBe('2 · attempt 3 to come');
      }
      const [entry] = await readChanges(s.h.ctx.redis, s.h.ctx.keys);
      expect(entry).toMatchObject({
        action: 'retry',
        who: 'dashboard:operator@127.0.0.1',
        details: { requeued: 4 },
      });

      // The run says it was retried, on the overview.
      const overview = await context.newPage();
      await overview.goto(`${base}/`);
      expect(await overview.locator(`[data-retried="${s.runId}"]`).textContent()).toMatch(
        /^\s*retried 4 at \d{4}-\d\d-\d\d \d\d:\d\d UTC by dashboard:operator@127\.0\.0\.1/,
      );

      // Workers pick them up: the rows follow without a reload.
      const workers = startWorkers(s.h.ctx, {
        orgs: ['acme'],
        concurrency: 5,
        untilIdle: true,
        idleCheckMs: 100,
      });
      try {
        for (const id of SERVER_ERROR) {
          await expect
            .poll(() => rowOf(page, id).locator('[data-state]').textContent(), POLL)
            .toBe('transferred');
          expect(await rowOf(page, id).locator('[data-attempts]').textContent()).toBe('3');
        }
      } finally {
        await workers.done;
      }
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('outcomes a retry cannot help say so and need "retry anyway" ticked before the button works', async () => {
    const { context, page, errors } = await as('operator', DASHBOARD_TOKEN);
    try {
      await page.goto(`${base}/failures?code=forbidden`);
      expect(await page.locator('#permanent-note').textContent()).toMatch(
        /forbidden 2\s*:\s*a retry fails the same way unless something changed on the service/,
      );
      await page.check('#select-all');
      await page.click('#retry-selected');
      const dialog = page.locator('dialog#retry-dialog[open]');
      await dialog.waitFor(POLL);
      expect(await dialog.locator('#retry-dialog-summary').textContent()).toBe(
        'retry 2 learners: 2 forbidden',
      );
      expect(await dialog.locator('.warn').textContent()).toMatch(
        /^2 forbidden: a retry fails the same way unless something changed on the service/,
      );
      expect(await page.locator('#retry-dialog-go').isDisabled()).toBe(true);
      mkdirSync(join(ROOT, 'test-results'), { recursive: true });
      await page.screenshot({ path: join(ROOT, 'test-results', 'retry-dialog.png') });
      await page.check('#retry-anyway');
      expect(await page.locator('#retry-dialog-go').isDisabled()).toBe(false);
      await page.click('#retry-dialog-go');
      await expect
        .poll(() => page.locator('#retry-result').textContent(), POLL)
        .toMatch(/^re-queued 2 \(2 forbidden\)/);
      for (const id of FORBIDDEN)
        expect(await rowOf(page, id).locator('[data-state]').textContent()).toBe('queued');

      // One learner's own retry button asks too when its outcome is not-found.
      await page.goto(`${base}/failures?code=not-found`);
      await rowOf(page, MISSING[0] as number)
        .locator('button.retry-one')
        .click();
      await page.locator('dialog#retry-dialog[open]').waitFor(POLL);
      expect(await page.locator('#retry-dialog-summary').textContent()).toBe('retry 1 learner: 1 not-found');
      expect(await page.locator('#retry-dialog-go').isDisabled()).toBe(true);
      await page.click('#retry-dialog-cancel');
      expect((await s.h.ctx.store.get('acme', MISSING[0] as number))?.b).toBe('not-found');
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  });
});

describe('the viewer token in Chromium', () => {
  it('sees every page with no button, and its POSTs are refused', async () => {
    const { context, page, errors } = await as('carol', READ_TOKEN);
    try {
      for (const url of ['/', '/failures', `/learners/acme/${MISSING[1]}`, '/controls', '/changes']) {
        await page.goto(`${base}${url}`);
        expect(await page.locator('#role-badge').textContent(), url).toBe('viewer');
        // Only the filter forms' buttons (GET) remain.
        const buttons = await page.locator('main button').allTextContents();
        expect(
          buttons.map((b) => b.trim()).filter((b) => b !== 'filter'),
          url,
        ).toEqual([]);
      }
      // A transferred learner's page: the revoked authorizations' user ids and roles, never an e-mail or a
      // name (issue 47); the operator's page shows them.
      const [moved, revoked] = TRANSFERRED.map(
        (id) => [id, s.h.sim.transfersOf(id).flatMap((t) => t.data.authorizations.revoked)] as const,
      ).sort((a, b) => b[1].length - a[1].length)[0] ?? [0, []];
      expect(revoked.length).toBeGreaterThan(0);
      await page.goto(`${base}/learners/acme/${moved}`);
      const seen = (await page.locator('main').textContent()) ?? '';
      for (const a of revoked) {
        expect(seen).toContain(`user ${a.userId}`);
        expect(seen).not.toContain(a.email);
        expect(seen).not.toContain(a.name);
      }
      const operator = await as('operator', DASHBOARD_TOKEN);
      try {
        await operator.page.goto(`${base}/learners/acme/${moved}`);
        const full = (await operator.page.locator('main').textContent()) ?? '';
        for (const a of revoked) expect(full).toContain(a.email);
      } finally {
        await operator.context.close();
      }
      await page.goto(`${base}/failures`);
      expect(await page.locator('input[name="learner"]').count()).toBe(0);
      const csrf = await page.locator('meta[name="csrf-token"]').getAttribute('content');
      const refused = await page.evaluate(
        async ([token]) => {
          const out: [string, number, string][] = [];
          for (const [method, url, body] of [
            ['POST', '/api/retry', { all: true }],
            ['POST', '/api/controls/pause', { org: 'acme' }],
            ['PUT', '/queues/api/queues/pause', {}],
          ] as const) {
            const r = await fetch(url, {
              method,
              credentials: 'same-origin',
              headers: { 'content-type': 'application/json', 'x-csrf-token': token ?? '' },
              body: JSON.stringify(body),
            });
            out.push([url, r.status, ((await r.json()) as { error: string }).error]);
          }
          return out;
        },
        [csrf] as const,
      );
      expect(refused).toEqual([
        ['/api/retry', 403, 'viewer'],
        ['/api/controls/pause', 403, 'viewer'],
        ['/queues/api/queues/pause', 403, 'viewer'],
      ]);
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  });
});

describe("bull-board's page", () => {
  it('links back to the dashboard', async () => {
    const { context, page } = await as('operator', DASHBOARD_TOKEN);
    try {
      await page.goto(`${base}/queues/`);
      const back = page.locator('#lt-dashboard-link');
      expect(await back.isVisible()).toBe(true);
      await back.click();
      await page.waitForURL(`${base}/`);
      expect(await page.locator('h1').first().textContent()).toBeTruthy();
    } finally {
      await context.close();
    }
  });
});
