// "Move ahead of the queue" in a real browser (the system Chromium through playwright-core): a learner
// deep in its organization's bulk is moved to the head from its own page, the page shows its new place,
// and the first transfer the simulator receives is that learner's. A click on a learner that finished in
// the meantime is explained, not obeyed. The page's script sends the CSRF token; a request without it, or
// with a forged one, is refused; a read-only dashboard hides the button and refuses the request. A
// browser that cannot launch fails this test: it never skips.
import type { FastifyInstance } from 'fastify';
import type { Browser, Page } from 'playwright-core';
import { launchChromium, POLL } from '../helpers/browser.ts';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildDashboard } from '../../src/dashboard/server.ts';
import { readChanges } from '../../src/limiter/control-log.ts';
import { startWorkers } from '../../src/worker/run-workers.ts';
import { DASHBOARD_TOKEN } from '../helpers/dashboard.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';

let h: Harness;
let app: FastifyInstance;
let readOnlyApp: FastifyInstance;
let base: string;
let readOnlyBase: string;
let browser: Browser;
const bulk = learnersNotIn('acme', 30);

beforeAll(async () => {
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
});
// A harness per test: each asserts on its own queue and change log.
beforeEach(async () => {
  h = await startHarness({
    tag: 'urgent-ui',
    sim: { learners: 600 },
    env: { DASHBOARD_TOKEN, LIMIT_PER_TOKEN: '500/1s', LIMIT_PER_ORG: '1000/1s' },
  });
  app = await buildDashboard(h.ctx, { bullBoard: false });
  readOnlyApp = await buildDashboard(h.ctx, { bullBoard: false, readOnly: true });
  base = (await app.listen({ port: 0, host: '127.0.0.1' })).replace(/\/$/, '');
  readOnlyBase = (await readOnlyApp.listen({ port: 0, host: '127.0.0.1' })).replace(/\/$/, '');
});
afterEach(async () => {
  await app?.close();
  await readOnlyApp?.close();
  await h?.close();
});

async function newPage(): Promise<{ page: Page; errors: string[]; close: () => Promise<void> }> {
  const context = await browser.newContext({
    httpCredentials: { username: 'operator', password: DASHBOARD_TOKEN },
    viewport: { width: 1280, height: 900 },
  });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  return { page, errors, close: () => context.close() };
}

/** A POST from the page itself (same origin, the browser's credentials), with the given CSRF header. */
function postFromPage(
  page: Page,
  url: string,
  csrf: string | null,
): Promise<{ status: number; body: unknown }> {
  return page.evaluate(
    async ([u, token]) => {
      const headers: Record<string, string> = token === null ? {} : { 'x-csrf-token': token };
      const r = await fetch(u, { method: 'POST', credentials: 'same-origin', headers });
      return { status: r.status, body: await r.json() };
    },
    [url, csrf] as const,
  );
}

describe('Move ahead of the queue, in Chromium', () => {
  it('moves a learner from deep in the bulk to the head; the next transfer is that learner', async () => {
    // The bulk waits: no worker runs until the test starts one.
    await h.enqueueIds(bulk);
    const target = bulk[20] as number;
    const later = bulk[5] as number;
    const { page, errors, close } = await newPage();
    const second = await newPage();
    try {
      await page.goto(`${base}/learners/acme/${target}`);
      expect(await page.locator('[data-queue]').textContent()).toBe('waiting · 21 of 30 in the queue');
      // A page of another waiting learner, opened now and clicked after that learner has finished.
      await second.page.goto(`${base}/learners/acme/${later}`);
      expect(await second.page.locator('#move-ahead').count()).toBe(1);

      // Without the page's CSRF token, or with a forged one, the same request is refused.
      const api = `/api/learners/acme/${target}/urgent`;
      const bare = await postFromPage(page, api, null);
      expect(bare.status).toBe(403);
      expect(bare.body).toMatchObject({ error: 'csrf' });
      const forged = await postFromPage(page, api, `${Date.now()}.forged-mac`);
      expect(forged.status).toBe(403);
      expect(await readChanges(h.ctx.redis, h.ctx.keys)).toEqual([]);

      await page.click('#move-ahead');
      await expect
        .poll(() => page.locator('#urgent-result').textContent(), POLL)
        .toBe(`learner ${target} moved ahead of the queue: waiting · 1 of 30 in the queue (next)`);
      expect(await page.locator('[data-queue]').textContent()).toBe('waiting · 1 of 30 in the queue (next)');
      const [entry] = await readChanges(h.ctx.redis, h.ctx.keys, { org: 'acme' });
      expect(entry).toMatchObject({
        action: 'priority.urgent',
        org: 'acme',
        who: 'dashboard:operator@127.0.0.1',
        details: { learnerIds: [target], source: 'dashboard', moved: 1 },
      });

      // One worker, one job at a time: the moved learner is the first call, then the bulk in order.
      const result = await startWorkers(h.ctx, {
        orgs: ['acme'],
        concurrency: 1,
        untilIdle: true,
        idleCheckMs: 100,
      }).done;
      expect(result.reason).toBe('idle');
      const order = h.sim.record.filter((r) => r.method === 'PATCH').map((r) => r.learnerId);
      expect(order).toEqual([target, ...bulk.filter((id) => id !== target)]);

      // The other page's learner is transferred by now: the click is explained, nothing moves.
      await second.page.click('#move-ahead');
      await expect
        .poll(() => second.page.locator('#urgent-result').textContent(), POLL)
        .toBe(`learner ${later} is already transferred: there is nothing to move ahead`);
      expect(await readChanges(h.ctx.redis, h.ctx.keys, { org: 'acme' })).toHaveLength(1);
      // Its page, reloaded, no longer offers the move.
      await second.page.reload();
      expect(await second.page.locator('#move-ahead').count()).toBe(0);
      expect(errors).toEqual([]);
      expect(second.errors).toEqual([]);
    } finally {
      await close();
      await second.close();
    }
  });

  it('a read-only dashboard shows the place but no button, and refuses the request', async () => {
    const [id] = learnersNotIn('acme', 1, 500);
    await h.enqueueIds([id as number]);
    const { page, errors, close } = await newPage();
    try {
      await page.goto(`${readOnlyBase}/learners/acme/${id}`);
      expect(await page.locator('.badge').textContent()).toBe('read-only');
      expect(await page.locator('[data-queue]').textContent()).toBe('waiting · 1 of 1 in the queue (next)');
      expect(await page.locator('#move-ahead').count()).toBe(0);
      const csrf = await page.locator('meta[name="csrf-token"]').getAttribute('content');
      const refused = await postFromPage(page, `/api/learners/acme/${id}/urgent`, csrf);
      expect(refused.status).toBe(403);
      expect(refused.body).toMatchObject({ error: 'read-only' });
      expect(await readChanges(h.ctx.redis, h.ctx.keys, { org: 'acme' })).toEqual([]);
      expect(errors).toEqual([]);
    } finally {
      await close();
    }
  });
});
