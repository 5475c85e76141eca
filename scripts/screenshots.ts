// Refreshes the dashboard's screenshots in docs/screenshots/ (overview.png, failures.png) at 1400 px
// wide: a throwaway state on the real pipeline (a Redis key prefix of its own on REDIS_URL, default
// redis://127.0.0.1:6379, and the built-in simulator; test/helpers/cockpit.ts: three organizations,
// one with failures, one paced and waiting for its run window, one done, and a day and a half of
// history), the dashboard on a free local port, the system Chromium. The prefix is deleted at the end.
//
//   node bin/run-ts.js scripts/screenshots.ts
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { buildDashboard } from '../src/dashboard/server.ts';
import { launchChromium } from '../test/helpers/browser.ts';
import { cockpitScenario } from '../test/helpers/cockpit.ts';
import { DASHBOARD_TOKEN } from '../test/helpers/dashboard.ts';

const ROOT = join(import.meta.dirname, '..');
const OUT = join(ROOT, 'docs', 'screenshots');

const s = await cockpitScenario({ history: 36 });
const app = await buildDashboard(s.h.ctx, { bullBoard: false });
try {
  const base = (await app.listen({ port: 0, host: '127.0.0.1' })).replace(/\/$/, '');
  const browser = await launchChromium();
  try {
    const context = await browser.newContext({
      httpCredentials: { username: 'operator', password: DASHBOARD_TOKEN },
      viewport: { width: 1400, height: 900 },
    });
    const page = await context.newPage();
    mkdirSync(OUT, { recursive: true });
    for (const [name, path] of [
      ['overview', '/'],
      ['failures', '/failures'],
    ] as const) {
      await page.goto(`${base}${path}`);
      await page.screenshot({ path: join(OUT, `${name}.png`), fullPage: true });
      process.stdout.write(`wrote docs/screenshots/${name}.png\n`);
    }
  } finally {
    await browser.close();
  }
} finally {
  await app.close();
  await s.close();
}
