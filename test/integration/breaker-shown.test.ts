// A halt of the error budget as people see it (docs/guard-rails.md): the organization halted by real
// workers (a token the simulator refuses on every learner) shows as paused by `breaker` with its reason
// on the dashboard's overview and controls page (fastify inject, no browser) and in `status`; the
// notifications say it once as `org.halted` and never as paused too long, while a pause by a person in
// the same fleet, held as long, is said as `org.paused` (so the watch did look). Real Redis, simulator
// and webhook receiver.
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDashboard } from '../../src/dashboard/server.ts';
import { setPaused } from '../../src/limiter/policy-control.ts';
import { Notifier } from '../../src/ops/notify/notifier.ts';
import { DEFAULT_TOKENS } from '../../src/simulator/index.ts';
import { startWorkers } from '../../src/worker/run-workers.ts';
import { runCommand } from '../helpers/cli.ts';
import { authed, DASHBOARD_TOKEN } from '../helpers/dashboard.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';
import { waitFor } from '../helpers/wait.ts';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.ts';

const TOKENS = 'acme:sim-acme-noperm,beta:sim-beta-1';

let h: Harness;
let rx: Receiver;
let app: FastifyInstance;
let reason = '';

beforeAll(async () => {
  rx = await startReceiver();
  h = await startHarness({
    tag: 'halt-shown',
    sim: {
      learners: 300,
      tokens: [...DEFAULT_TOKENS, { token: 'sim-acme-noperm', org: 'acme', canTransfer: false }],
    },
    env: {
      LEARNER_API_TOKENS: TOKENS,
      LIMIT_PER_TOKEN: '5000/1s',
      LIMIT_PER_ORG: '20000/1s',
      DASHBOARD_TOKEN,
      NOTIFY_WEBHOOK_URL: rx.url,
      NOTIFY_BLOCKED_AFTER: '1s',
      NOTIFY_STALL_AFTER: '1h',
      LOG_LEVEL: 'warn',
    },
  });
  app = await buildDashboard(h.ctx, { bullBoard: false });
}, 30_000);
afterAll(async () => {
  await app?.close();
  await h?.close();
  await rx?.close();
});

describe('a halt by the error budget', () => {
  it('is said once as org.halted, never as paused too long (a person’s pause is)', async () => {
    const { ctx } = h;
    await h.enqueueIds(learnersNotIn('acme', 60), 'acme');
    await h.enqueueIds(learnersNotIn('beta', 5, 200), 'beta');
    await setPaused(ctx.redis, ctx.keys, 'beta', null, true, 'test:person');
    const notifier = new Notifier(ctx, rx.url, { retryMs: [50], runDelayMs: 50 });
    notifier.start();
    const work = startWorkers(ctx, {
      orgs: ['acme', 'beta'],
      concurrency: 4,
      untilIdle: false,
      onOutcome: notifier.noteOutcome.bind(notifier),
      ...notifier.workHooks(),
    });
    try {
      const paused = await waitFor(
        'acme to halt',
        async () => (await ctx.budget.policy('acme')).paused,
        (p) => p !== null,
        { timeoutMs: 20_000 },
      );
      expect(paused).toMatchObject({ who: 'breaker' });
      reason = paused?.reason ?? '';
      expect(reason).toMatch(/^(\d+) of the last \1 calls answered 403 forbidden$/);
      // beta's pause by a person, held past NOTIFY_BLOCKED_AFTER, is said: the watch looked at both.
      await waitFor(
        'org.paused for beta',
        () => rx.of('org.paused').length,
        (n) => n > 0,
        {
          timeoutMs: 20_000,
        },
      );
      // acme has been halted for longer than NOTIFY_BLOCKED_AFTER too: a few more looks say nothing of it.
      await new Promise((r) => setTimeout(r, 2500));
    } finally {
      await work.stop();
      await work.done;
      await notifier.stop(2000);
    }
    expect(rx.of('org.paused').map((m) => m.body.org)).toEqual(['beta']);
    const halted = rx.of('org.halted');
    expect(halted).toHaveLength(1);
    expect(halted[0]?.body).toMatchObject({ event: 'org.halted', org: 'acme', reason });
    expect(Date.now() - Date.parse((await ctx.budget.policy('acme')).paused?.at ?? '')).toBeGreaterThan(1000);
  }, 60_000);

  it('shows on the overview and the controls page, paused by breaker with its reason', async () => {
    expect(reason).not.toBe('');
    const page = await authed(app, { url: '/' });
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('data-org-paused="acme"');
    expect(page.body).toMatch(/paused by breaker since <time>[^<]+<\/time>: <span data-pause-reason>/);
    expect(page.body).toContain(`<span data-pause-reason>${reason}</span>`);
    const controls = await authed(app, { url: '/controls?org=acme' });
    expect(controls.statusCode).toBe(200);
    expect(controls.body).toMatch(/data-org="acme" data-paused="true"/);
    expect(controls.body).toContain('<b data-paused-by>breaker</b>');
    expect(controls.body).toContain(`<span data-pause-reason>${reason}</span>`);
    expect(controls.body).toContain('data-action="resume"');
  });

  it('shows in status, with its reason', async () => {
    const status = await runCommand(['status'], h.env);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toContain('PAUSED by breaker');
    expect(status.stdout).toContain(reason);
  });
});
