// Chromium for the dashboard's browser tests: Debian's /usr/bin/chromium (installed by .ci/run), driven
// by playwright-core, headless and without a sandbox (tests run as root). A missing browser fails the
// test loudly: a browser test that cannot run proves nothing.
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';

export const CHROMIUM_PATH = '/usr/bin/chromium';

/**
 * How long a browser test polls the page for what a click or an event should show: expect.poll's default
 * is 1 s, which a page driven over CDP on a busy two-core machine can miss with nothing wrong. A pass
 * costs no more for it; a real failure still fails, naming the value polled.
 */
export const POLL = { timeout: 20_000, interval: 50 } as const;

const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--headless',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM_PATH, args: CHROMIUM_ARGS });
}

/**
 * A page signed in with basic auth as `username`/`password`, and the page errors it raised. A native
 * dialog (window.confirm, alert) is recorded as an error and dismissed: the dashboard asks in-page.
 */
export async function pageAs(
  browser: Browser,
  username: string,
  password: string,
  viewport = { width: 1280, height: 900 },
): Promise<{ context: BrowserContext; page: Page; errors: string[] }> {
  const context = await browser.newContext({ httpCredentials: { username, password }, viewport });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('dialog', (d) => {
    errors.push(`native dialog: ${d.message()}`);
    void d.dismiss();
  });
  return { context, page, errors };
}
