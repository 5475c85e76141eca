// Notifications (docs/notifications.md) against a real HTTP receiver, a real Redis and the simulator: each
// event once with the JSON promised, whatever the number of notifiers (two here, as two `work` processes
// would run), tried again on a 5xx, never in a transfer's way, with no token in a body and the webhook URL
// in no log line (the logger here scrubs nothing, so a leak would show).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/core/log.ts';
import { setPaused } from '../../src/limiter/policy-control.ts';
import { tokenRefused } from '../../src/ops/notify/events.ts';
import { Notifier, type NotifierOptions } from '../../src/ops/notify/notifier.ts';
import { WebhookSender } from '../../src/ops/notify/send.ts';
import { startWorkers } from '../../src/worker/run-workers.ts';
import type { AppContext } from '../../src/app/context.ts';
import type { OutcomeEvent } from '../../src/worker/processor-context.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';
import { tokenLeaks } from '../helpers/token-leaks.ts';
import { waitFor } from '../helpers/wait.ts';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.ts';

const OPTS: NotifierOptions = { retryMs: [50, 100, 200], timeoutMs: 2000, runDelayMs: 50 };
const TOKENS = 'acme:sim-acme-1,acme:sim-acme-2,beta:sim-beta-1,gamma:sim-gamma-readonly';
const SECRETS = ['sim-acme-1', 'sim-acme-2', 'sim-beta-1', 'sim-gamma-readonly'];

let rx: Receiver;
let h: Harness;
/** The context with a logger that scrubs nothing: what the notifier itself writes. */
let ctx: AppContext;
const raw: string[] = [];

beforeAll(async () => {
  rx = await startReceiver();
  h = await startHarness({
    tag: 'notify',
    sim: { learners: 300 },
    env: {
      LEARNER_API_TOKENS: TOKENS,
      NOTIFY_WEBHOOK_URL: rx.url,
      NOTIFY_FAILURE_SHARE: '10%',
      NOTIFY_BLOCKED_AFTER: '1s',
      NOTIFY_STALL_AFTER: '1s',
    },
  });
  const logger = createLogger({ level: 'debug', destination: { write: (l: string) => void raw.push(l) } });
  ctx = { ...h.ctx, logger };
});
afterAll(async () => {
  await h?.close();
  await rx?.close();
});

function two(): [Notifier, Notifier, (e: OutcomeEvent) => void] {
  const a = new Notifier(ctx, rx.url, OPTS);
  const b = new Notifier(ctx, rx.url, OPTS);
  return [a, b, (e) => (a.noteOutcome(e), b.noteOutcome(e))];
}

function until(what: string, probe: () => boolean): Promise<boolean> {
  return waitFor(what, probe, (v) => v, { timeoutMs: 15_000 });
}

function tokenIdOf(secret: string): string {
  return h.config.tokens.find((t) => t.secret === secret)?.id as string;
}

describe('notifications', () => {
  it('says a run finished, and its failures above the share, once with two notifiers', async () => {
    const [a, b, both] = two();
    // One run over two organizations, as a CSV with an org column makes.
    const { runId } = await h.enqueueIds([...learnersNotIn('acme', 4), 999_999]);
    await h.enqueueIds(learnersNotIn('beta', 2, 30), 'beta', { runId });
    const result = await h.workUntilIdle({ orgs: ['acme', 'beta'], onOutcome: both });
    expect(result).toMatchObject({ reason: 'idle', succeeded: 6, failed: 1 });
    await Promise.all([a.stop(), b.stop()]);

    const finished = rx.of('run.finished');
    expect(finished).toHaveLength(1);
    expect(finished[0]?.headers['content-type']).toBe('application/json');
    expect(finished[0]?.path).toBe(rx.secretPath);
    expect(finished[0]?.body).toEqual({
      text: expect.stringContaining(
        `Run ${runId} for 2 organizations finished: 6 of 7 learners transferred, 1 failed.`,
      ),
      event: 'run.finished',
      org: null,
      run: runId,
      counts: {
        done: 6,
        failed: 1,
        waiting: 0,
        cancelled: 0,
        approval: 0,
        total: 7,
        buckets: { transferred: 6, 'not-found': 1 },
      },
      at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      report: null,
    });
    const failures = rx.of('run.failures');
    expect(failures).toHaveLength(1);
    expect(failures[0]?.body).toMatchObject({
      event: 'run.failures',
      org: null,
      run: runId,
      threshold: 0.1,
      counts: { failed: 1 },
    });
    expect(failures[0]?.body.share).toBeGreaterThanOrEqual(0.1);
    // Two notifiers looked at the run (each maybe more than once): one claim each event, the other skipped it.
    expect(a.stats.sent + b.stats.sent).toBe(2);
    expect(a.stats.skipped + b.stats.skipped).toBe(2);
  });

  it('says a token refused (401) once, by its id, never its value', async () => {
    const [a, b, both] = two();
    h.sim.revokeToken('sim-beta-1');
    await h.enqueueIds(learnersNotIn('beta', 3, 60), 'beta');
    const result = await h.workUntilIdle({ orgs: ['beta'], onOutcome: both });
    expect(result.reason).toBe('unauthorized');
    await Promise.all([a.stop(), b.stop()]);
    const refused = rx.of('token.refused');
    expect(refused).toHaveLength(1);
    expect(refused[0]?.body).toMatchObject({
      event: 'token.refused',
      org: 'beta',
      run: null,
      tokenId: tokenIdOf('sim-beta-1'),
      text: expect.stringContaining(`'learner-transfer tokens unpause --org beta'`),
    });
  });

  it('says an organization paused, one blocked and one stalled past their delays, once each', async () => {
    // acme: learners waiting, paused. beta: every token refused (above) and blocked by a 429 of a minute.
    // gamma: learners waiting, budget there, and no worker at all: nothing finishes.
    await h.enqueueIds(learnersNotIn('acme', 3, 100), 'acme');
    await setPaused(h.ctx.redis, h.ctx.keys, 'acme', null, true, 'test:notify');
    await h.enqueueIds(learnersNotIn('beta', 2, 120), 'beta');
    await h.ctx.budget.block('beta', null, 60_000, '429');
    await h.enqueueIds(learnersNotIn('gamma', 2, 140), 'gamma');
    const [a, b, both] = two();
    a.start();
    b.start();
    // Workers for acme and beta meet the pause and the block when they ask for a permit; none serves gamma.
    const work = startWorkers(ctx, {
      orgs: ['acme', 'beta'],
      concurrency: 2,
      untilIdle: false,
      onOutcome: both,
      onRefused: (org, scope, indefinite) => {
        a.noteRefused(org, scope, indefinite);
        b.noteRefused(org, scope, indefinite);
      },
    });
    await until('org.paused, org.blocked and org.stalled', () =>
      ['org.paused', 'org.blocked', 'org.stalled'].every((e) => rx.of(e).length > 0),
    );
    // A few more looks: nothing is said twice.
    await new Promise((r) => setTimeout(r, 1500));
    await work.stop();
    await Promise.all([a.stop(), b.stop()]);

    const paused = rx.of('org.paused');
    expect(paused).toHaveLength(1);
    expect(paused[0]?.body).toMatchObject({
      org: 'acme',
      since: expect.any(String),
      counts: { waiting: 3 },
      text: expect.stringContaining('paused by test:notify'),
    });
    const blocked = rx.of('org.blocked');
    expect(blocked).toHaveLength(1);
    expect(blocked[0]?.body).toMatchObject({ org: 'beta', text: expect.stringContaining('429') });
    const stalled = rx.of('org.stalled');
    expect(stalled).toHaveLength(1);
    expect(stalled[0]?.body).toMatchObject({ org: 'gamma', counts: { waiting: 2, done: 0 } });
    await setPaused(h.ctx.redis, h.ctx.keys, 'acme', null, false, 'test:notify');
  });

  it('forgets a hold once the organization moves again (a later hold is a new episode)', async () => {
    // acme was paused above and said; it is resumed: its learners go, and its hold is removed.
    expect(await h.ctx.redis.hget(h.ctx.keys.notifyStuck(), 'acme')).toMatch(/ 1$/);
    const n = new Notifier(ctx, rx.url, OPTS);
    n.start();
    const work = startWorkers(ctx, {
      orgs: ['acme'],
      concurrency: 2,
      untilIdle: false,
      onOutcome: (e) => n.noteOutcome(e),
      onRefused: (org, scope, indefinite) => n.noteRefused(org, scope, indefinite),
    });
    await waitFor(
      "acme's hold removed",
      () => h.ctx.redis.hget(h.ctx.keys.notifyStuck(), 'acme'),
      (v) => v === null,
      { timeoutMs: 15_000 },
    );
    await work.stop();
    await n.stop();
  });

  it('tries again after a 500: two 500s, then the 200 gets it, the same body', async () => {
    const start = rx.received.length;
    rx.answer = (n) => (n - start < 2 ? 500 : 200);
    const sender = new WebhookSender({
      url: rx.url,
      redis: h.ctx.redis,
      keys: h.ctx.keys,
      logger: ctx.logger,
      retryMs: [50, 100, 200],
    });
    sender.submit(tokenRefused('acme', 'aaaaaaaaaaaa', new Date()));
    await until('the third try', () => sender.stats.sent === 1);
    const tries = rx.received.slice(start);
    expect(tries).toHaveLength(3);
    expect(new Set(tries.map((t) => t.raw)).size).toBe(1);
    await sender.close();
    rx.answer = () => 200;
  });

  it('logs a send that finally fails once, with the URL masked', async () => {
    rx.answer = () => 503;
    const before = raw.length;
    const sender = new WebhookSender({
      url: rx.url,
      redis: h.ctx.redis,
      keys: h.ctx.keys,
      logger: ctx.logger,
      retryMs: [20, 20],
    });
    sender.submit(tokenRefused('acme', 'bbbbbbbbbbbb', new Date()));
    await until('the send to fail', () => sender.stats.failed === 1);
    await sender.close();
    const lines = raw.slice(before).filter((l) => l.includes('could not be sent'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('the receiver answered 503');
    expect(lines[0]).toContain(`${new URL(rx.url).host}/***`);
    rx.answer = () => 200;
  });

  it('does not slow transfers when the receiver never answers', async () => {
    // Each learner id of this file is used once (a learner done is not queued again).
    await setPaused(h.ctx.redis, h.ctx.keys, 'acme', null, false, 'test:notify');
    const baselineStart = Date.now();
    await h.enqueueIds(learnersNotIn('acme', 20, 160));
    const baseline = await h.workUntilIdle();
    const baselineMs = Date.now() - baselineStart;
    expect(baseline.succeeded).toBeGreaterThanOrEqual(20); // and acme's 3 paused above

    rx.answer = () => 'hang';
    const n = new Notifier(ctx, rx.url, { ...OPTS, timeoutMs: 60_000 });
    // A send held open before the run starts, and every one during it.
    n.noteOutcome({
      org: 'acme',
      code: 'unauthorized',
      tokenId: 'cccccccccccc',
      final: false,
    } as OutcomeEvent);
    await until('a request held open', () => rx.hanging > 0);
    const start = Date.now();
    await h.enqueueIds(learnersNotIn('acme', 20, 220));
    const result = await h.workUntilIdle({ onOutcome: (e) => n.noteOutcome(e) });
    const ms = Date.now() - start;
    expect(result.succeeded).toBe(20);
    expect(rx.hanging).toBeGreaterThan(0);
    expect(ms).toBeLessThan(baselineMs * 3 + 3000);
    // The stop waits for the receiver no longer than it is told.
    const stopStart = Date.now();
    await n.stop(300);
    expect(Date.now() - stopStart).toBeLessThan(3000);
    rx.answer = () => 200;
  });

  it('puts no token in any body and the webhook URL in no log line', () => {
    expect(rx.received.length).toBeGreaterThan(5);
    expect(
      tokenLeaks(
        rx.received.map((r) => r.raw),
        SECRETS,
      ),
    ).toEqual([]);
    const logs = [...raw, ...h.logLines];
    expect(logs.some((l) => l.includes('notification sent'))).toBe(true);
    const secret = rx.secretPath.split('/').pop() as string;
    expect(logs.filter((l) => l.includes(secret) || l.includes(rx.secretPath))).toEqual([]);
  });
});
