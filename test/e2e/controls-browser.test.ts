// The dashboard's live controls in a real browser (the system Chromium through playwright-core), over a
// real Redis and the real simulator: open the Controls page, pause an organization and see it paused
// (by the dashboard user, in Redis too), resume it, pause and resume one token, set a limit and see it
// shown, and see the change log rows, newest first, each with the dashboard user. The page's script
// sends the CSRF token; a read-only dashboard shows the state without any control. Saves a screenshot
// to test-results/controls.png. A browser that cannot launch fails this test: it never skips.
import { mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Browser, Locator, Page } from 'playwright-core';
import { launchChromium, POLL } from '../helpers/browser.ts';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { dashboardActor, readChanges } from '../../src/limiter/control-log.ts';
import { buildDashboard } from '../../src/dashboard/server.ts';
import { readPolicy } from '../../src/limiter/policy.ts';
import { setLimits } from '../../src/limiter/policy-control.ts';
import { ROOT } from '../helpers/cli.ts';
import { DASHBOARD_TOKEN } from '../helpers/dashboard.ts';
import { startHarness, type Harness } from '../helpers/pipeline.ts';

let h: Harness;
let app: FastifyInstance;
let readOnlyApp: FastifyInstance;
let base: string;
let readOnlyBase: string;
let browser: Browser;
const WHO = dashboardActor('operator', '127.0.0.1');

beforeAll(async () => {
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
});
// A harness per test: the first asserts an empty change log, the second one it wrote itself.
beforeEach(async () => {
  h = await startHarness({
    tag: 'controls-ui',
    env: { DASHBOARD_TOKEN, LIMIT_PER_TOKEN: '20/2s', LIMIT_PER_ORG: '60/4s' },
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

/** An element's text with its whitespace collapsed (the page's markup is indented). */
async function text(locator: Locator): Promise<string> {
  return ((await locator.textContent()) ?? '').replace(/\s+/g, ' ').trim();
}

async function open(url: string): Promise<{ page: Page; errors: string[]; close: () => Promise<void> }> {
  const context = await browser.newContext({
    httpCredentials: { username: 'operator', password: DASHBOARD_TOKEN },
    viewport: { width: 1280, height: 900 },
  });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('dialog', (d) => void d.accept());
  await page.goto(url);
  return { page, errors, close: () => context.close() };
}

describe('controls in Chromium', () => {
  it('pause, see the state, resume, set a limit, see it shown, and see the change log rows', async () => {
    const { page, errors, close } = await open(`${base}/`);
    try {
      await page.click('nav a[href="/controls"]');
      await page.waitForURL(/\/controls$/);
      const acme = page.locator('section[data-org="acme"]');
      const state = acme.locator('[data-org-state]');
      const result = acme.locator('[data-result]');
      expect(await state.textContent()).toBe('running');
      expect(await acme.locator('[data-no-changes]').count()).toBe(1);
      expect(await acme.locator('td[data-learned]').first().textContent()).toBe('-');

      // Pause the organization (the page asks for a confirmation, accepted).
      await acme.locator('.org-state button[data-action="pause"]').click();
      await expect.poll(() => state.textContent(), POLL).toBe('paused');
      expect(await result.textContent()).toMatch(/^paused organization 'acme'/);
      expect(await acme.locator('.org-state [data-paused-by]').textContent()).toBe(WHO);
      expect(await acme.getAttribute('data-paused')).toBe('true');
      expect((await readPolicy(h.ctx.redis, h.ctx.keys, 'acme')).paused?.who).toBe(WHO);
      // The overview shows it too.
      const overview = await page.context().newPage();
      await overview.goto(`${base}/`);
      expect(await overview.locator('[data-org-paused="acme"]').textContent()).toContain(`paused by ${WHO}`);
      await overview.close();

      // Resume.
      await acme.locator('.org-state button[data-action="resume"]').click();
      await expect.poll(() => state.textContent(), POLL).toBe('running');
      expect(await result.textContent()).toMatch(/^resumed organization 'acme'/);
      expect((await readPolicy(h.ctx.redis, h.ctx.keys, 'acme')).paused).toBeNull();

      // One token: pause and resume it from its row.
      const token = h.config.tokens[0]?.id as string;
      const row = acme.locator(`tr[data-token="${token}"]`);
      await row.locator('button[data-action="pause"]').click();
      await expect.poll(() => row.locator('[data-paused-by]').textContent(), POLL).toBe(WHO);
      expect(await state.textContent()).toBe('running');
      await row.locator('button[data-action="resume"]').click();
      await expect.poll(() => text(row.locator('[data-token-paused]')), POLL).toBe('no');

      // A bad limit is refused with the field named, and nothing changes.
      await acme.locator('input[name="perToken"]').fill('25/2x');
      await acme.locator('form.limits-form button[type="submit"]').click();
      await expect.poll(() => result.textContent(), POLL).toMatch(/^refused: perToken: expected N\/DURATION/);
      expect(await acme.locator('[data-limit="perToken"]').textContent()).toBe('20/2s');

      // Set the default per token and the organization's limit with a reserve.
      await acme.locator('input[name="perToken"]').fill('5/2s');
      await acme.locator('input[name="perOrg"]').fill('40/4s');
      await acme.locator('input[name="reserve"]').fill('10');
      await acme.locator('form.limits-form button[type="submit"]').click();
      await expect.poll(() => acme.locator('[data-limit="perToken"]').textContent(), POLL).toBe('5/2s');
      expect(await acme.locator('[data-limit="perOrg"]').textContent()).toBe('40/4s');
      expect(await acme.locator('[data-limit="reserve"]').textContent()).toBe('10');
      expect(await acme.locator('[data-limit="usable"]').textContent()).toBe('30/4s');
      expect(await result.textContent()).toContain('perToken 20/2s -> 5/2s');
      expect(await text(acme.locator(`tr[data-token="${token}"] [data-token-limit]`))).toBe('5/2s default');
      // The form was reloaded empty.
      expect(await acme.locator('input[name="perToken"]').inputValue()).toBe('');
      const policy = await readPolicy(h.ctx.redis, h.ctx.keys, 'acme');
      expect(policy).toMatchObject({ perToken: { max: 5, windowMs: 2000 }, reserve: 10 });

      // One token's own limit.
      await acme.locator('input[name="perToken"]').fill('3/1s');
      await acme.locator('select[name="token"]').selectOption(token);
      await acme.locator('form.limits-form button[type="submit"]').click();
      await expect
        .poll(() => text(acme.locator(`tr[data-token="${token}"] [data-token-limit]`)), POLL)
        .toBe('3/1s own');

      // The change log rows, newest first, each by the dashboard user; the same in Redis.
      const actions = acme.locator('table.changes [data-change-action]');
      expect(await actions.allTextContents()).toEqual([
        'limits.set',
        'limits.set',
        'resume',
        'pause',
        'resume',
        'pause',
      ]);
      const who = await acme.locator('table.changes tbody tr td:nth-child(2)').allTextContents();
      expect(new Set(who)).toEqual(new Set([WHO]));
      const log = await readChanges(h.ctx.redis, h.ctx.keys, { org: 'acme' });
      expect(log.map((e) => e.action)).toEqual(await actions.allTextContents());
      expect(
        await acme.locator('table.changes tbody tr').first().locator('td.message').textContent(),
      ).toContain(token);

      // Reset (confirmed) back to LIMIT_*.
      await acme.locator('button[data-action="reset"]').click();
      await expect.poll(() => acme.locator('[data-limit="perToken"]').textContent(), POLL).toBe('20/2s');
      expect(await acme.locator('[data-limit="perOrg"]').textContent()).toBe('60/4s');
      expect(await actions.first().textContent()).toBe('limits.reset');

      mkdirSync(join(ROOT, 'test-results'), { recursive: true });
      const shot = join(ROOT, 'test-results', 'controls.png');
      await page.screenshot({ path: shot, fullPage: true });
      expect(statSync(shot).size).toBeGreaterThan(10_000);
      expect(errors).toEqual([]);
    } finally {
      await close();
    }
  });

  it('read-only: the state and the change log, no control; a POST from the page is refused', async () => {
    // A change made elsewhere (the CLI), for the read-only page to show.
    await setLimits(
      h.ctx.redis,
      h.ctx.keys,
      'acme',
      { perToken: { max: 5, windowMs: 2000 } },
      h.config,
      'cli:op@host',
    );
    const { page, errors, close } = await open(`${readOnlyBase}/controls`);
    try {
      const acme = page.locator('section[data-org="acme"]');
      expect(await acme.locator('[data-org-state]').textContent()).toBe('running');
      expect(await page.locator('button[data-action]').count()).toBe(0);
      expect(await page.locator('form.limits-form').count()).toBe(0);
      expect(await acme.locator('table.changes [data-change-action]').allTextContents()).toEqual([
        'limits.set',
      ]);
      const csrf = await page.locator('meta[name="csrf-token"]').getAttribute('content');
      const status = await page.evaluate(async (token) => {
        const r = await fetch('/api/controls/pause', {
          method: 'POST',
          credentials: 'same-origin',
          headers: { 'content-type': 'application/json', 'x-csrf-token': token ?? '' },
          body: JSON.stringify({ org: 'acme' }),
        });
        return r.status;
      }, csrf);
      expect(status).toBe(403);
      expect((await readPolicy(h.ctx.redis, h.ctx.keys, 'acme')).paused).toBeNull();
      expect(errors).toEqual([]);
    } finally {
      await close();
    }
  });
});
