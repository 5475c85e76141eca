// The error budget end to end (docs/guard-rails.md): real Redis, the real simulator, the real workers.
// A token refused on every learner halts the organization within 25 calls (counted on the simulator's
// record), and a good token, `resume` and `retry` finish the run; a token without permission among three
// is paused alone; normal cohorts (1 forbidden in 50, 15% stale ids) never halt; a 5xx storm is probed
// one call at a time and the run finishes when it ends.
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { tokenRef } from '../../src/core/token-ref.ts';
import { readSample } from '../../src/limiter/breaker.ts';
import { readChanges } from '../../src/limiter/control-log.ts';
import { Notifier } from '../../src/ops/notify/notifier.ts';
import { progressOf } from '../../src/outcomes/run-progress.ts';
import type { RequestRecord } from '../../src/simulator/index.ts';
import { DEFAULT_TOKENS } from '../../src/simulator/index.ts';
import { startWorkers } from '../../src/worker/run-workers.ts';
import { EXIT } from '../../src/cli/shared.ts';
import { runCommand } from '../helpers/cli.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';
import { waitFor } from '../helpers/wait.ts';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.ts';

let h: Harness | undefined;
let receiver: Receiver | undefined;
afterEach(async () => {
  await h?.close();
  await receiver?.close();
  h = undefined;
  receiver = undefined;
});

/** Limits far above the sample: the budget never holds a call back, only the error budget does. */
const WIDE = { LIMIT_PER_TOKEN: '5000/1s', LIMIT_PER_ORG: '20000/1s', LOG_LEVEL: 'warn' };
const NO_PERMISSION = { token: 'sim-acme-noperm', org: 'acme', canTransfer: false };

/** The figures of each case, for the note (BREAKER_REPORT=1 prints them). */
function report(what: string, figures: Record<string, number>): void {
  if (process.env.BREAKER_REPORT)
    process.stdout.write(`breaker figures: ${what} ${JSON.stringify(figures)}\n`);
}

const transfers = (sim: Harness['sim']): RequestRecord[] =>
  sim.record.filter((r) => r.method === 'PATCH' && r.learnerId !== undefined);

/** Waits until no transfer call is in flight and none arrived for `quietMs`. */
async function settled(sim: Harness['sim'], quietMs = 500): Promise<number> {
  let last = -1;
  return waitFor(
    'the transfer calls to settle',
    async () => {
      const calls = transfers(sim);
      const inFlight = calls.some((r) => r.status === 0);
      const same = calls.length === last;
      last = calls.length;
      if (!inFlight && same) return calls.length;
      await sleep(quietMs);
      return -1;
    },
    (n) => n >= 0,
    { timeoutMs: 30_000 },
  );
}

describe('a token refused on every learner (403)', () => {
  it('halts the organization within 25 calls; a good token, resume and retry finish the run', async () => {
    receiver = await startReceiver();
    h = await startHarness({
      tag: 'halt',
      sim: {
        learners: 1000,
        tokens: [...DEFAULT_TOKENS, NO_PERMISSION],
        faults: { latencyAfterMs: [5, 20] },
      },
      env: { ...WIDE, LEARNER_API_TOKENS: 'acme:sim-acme-noperm' },
    });
    const { ctx, sim } = h;
    const ids = learnersNotIn('acme', 300);
    const { runId } = await h.enqueueIds(ids);
    const notifier = new Notifier(ctx, receiver.url, { retryMs: [50] });
    const work = startWorkers(ctx, {
      orgs: ['acme'],
      concurrency: 4,
      untilIdle: false,
      onHalt: notifier.noteHalt.bind(notifier),
    });
    const paused = await waitFor(
      'the organization to halt',
      async () => (await ctx.budget.policy('acme')).paused,
      (p) => p !== null,
    );
    const calls = await settled(sim);
    await work.stop();
    await work.done;
    // The goal: at most 25 calls before the halt (today: 300 calls, 300 learners failed).
    expect(calls).toBeLessThanOrEqual(25);
    report('403 on every learner', { callsBeforeHalt: calls });
    expect(transfers(sim).every((r) => r.status === 403)).toBe(true);
    expect(paused).toMatchObject({ who: 'breaker' });
    expect(paused?.reason).toMatch(/^(\d+) of the last \1 calls answered 403 forbidden$/);
    // Calls in flight finished and were recorded; every other learner waits, with no attempt used.
    const counts = await ctx.store.runCounts('acme', runId);
    expect(counts.forbidden).toBe(calls);
    expect(progressOf(counts).waiting).toBe(300 - calls);
    const queue = ctx.queues.get('acme');
    const waiting = await queue.getJobs(['wait', 'prioritized', 'delayed']);
    expect(waiting.length).toBe(300 - calls);
    expect(waiting.every((j) => j.attemptsMade === 0)).toBe(true);
    // Seen by `status`, `limits show` and `changes`; said once by a notification.
    const env = { ...h.env, LEARNER_API_TOKENS: 'acme:sim-acme-noperm' };
    const status = await runCommand(['status', '--org', 'acme'], env);
    expect(status.stdout).toContain(`PAUSED by breaker`);
    expect(status.stdout).toContain(paused?.reason ?? '?');
    expect((await runCommand(['limits', 'show', '--org', 'acme'], env)).stdout).toMatch(
      /error budget {3}halts at 50% failures of the last 20 outcomes/,
    );
    expect((await runCommand(['changes'], env)).stdout).toMatch(/breaker {2}pause {2}acme .*403 forbidden/);
    await waitFor(
      'org.halted',
      () => receiver?.of('org.halted').length ?? 0,
      (n) => n === 1,
    );
    expect(receiver.of('org.halted')[0]?.body.text).toContain("'learner-transfer plan --check'");
    await notifier.stop(1000);
    expect(receiver.of('org.halted')).toHaveLength(1);

    // A token that may transfer, then resume and retry: every learner moves.
    ctx.tokens.replace([tokenRef('acme', 'sim-acme-1')]);
    const goodEnv = { ...h.env, LEARNER_API_TOKENS: 'acme:sim-acme-1' };
    const resumed = await runCommand(['resume', '--org', 'acme'], goodEnv);
    expect(resumed.stdout).toContain('resumed organization');
    expect((await readSample(ctx.redis, ctx.keys, 'acme')).held).toBe(0);
    expect(
      (await runCommand(['retry', '--status', 'forbidden', '--org', 'acme', '--yes'], goodEnv)).code,
    ).toBe(0);
    await h.workUntilIdle({ concurrency: 4 });
    const after = await ctx.store.runCounts('acme', runId);
    expect(after.transferred).toBe(300);
    const resume = (await readChanges(ctx.redis, ctx.keys, { count: 20 })).find((c) => c.action === 'resume');
    expect(resume?.who).toMatch(/^cli:/);
  }, 120_000);
});

describe('work --until-idle and a halt', () => {
  it('ends with its own exit status, naming the halted organization, its reason and resume --org', async () => {
    h = await startHarness({
      tag: 'halt-idle',
      sim: { learners: 1000, tokens: [...DEFAULT_TOKENS, NO_PERMISSION] },
      env: { ...WIDE, LEARNER_API_TOKENS: 'acme:sim-acme-noperm' },
    });
    const { runId } = await h.enqueueIds(learnersNotIn('acme', 100));
    // The learners wait for a person's resume: the process must end, not wait with them for ever.
    const r = await runCommand(
      ['work', '--until-idle', '--org', 'acme', '--concurrency', '4'],
      h.env,
      30_000,
    );
    expect(r.code, r.stderr).toBe(EXIT.halted);
    const paused = (await h.ctx.budget.policy('acme')).paused;
    expect(paused?.who).toBe('breaker');
    expect(r.stderr).toContain(
      `organization acme is halted by the error budget: ${paused?.reason ?? '?'}; its learners wait ` +
        `('learner-transfer resume --org acme' once the cause is fixed, exit ${EXIT.halted})`,
    );
    const counts = await h.ctx.store.runCounts('acme', runId);
    expect(progressOf(counts).waiting).toBe(100 - (counts.forbidden ?? 0));
  }, 60_000);
});

describe('normal cohorts never halt', () => {
  it('1 learner in 50 forbidden, spread over 500', async () => {
    const ids = learnersNotIn('acme', 500);
    const forbidden = ids.filter((_, i) => i % 50 === 25);
    h = await startHarness({
      tag: 'spread',
      sim: { learners: 1000, forbiddenLearnerIds: forbidden },
      env: WIDE,
    });
    const { runId } = await h.enqueueIds(ids);
    await h.workUntilIdle({ concurrency: 4 });
    const counts = await h.ctx.store.runCounts('acme', runId);
    expect([counts.transferred, counts.forbidden]).toEqual([490, 10]);
    const policy = await h.ctx.budget.policy('acme');
    expect([policy.paused, policy.pausedTokens]).toEqual([null, {}]);
    expect(transfers(h.sim)).toHaveLength(500);
    report('1 in 50 forbidden', { calls: 500, halted: 0 });
  }, 120_000);

  it('15% stale ids spread through the cohort', async () => {
    const real = learnersNotIn('acme', 170);
    // Ids the service does not know (404), every 7th or so: 30 of 200.
    const ids: number[] = [];
    for (let i = 0; i < 200; i++) ids.push(i % 20 < 3 ? 900_000 + i : (real.shift() as number));
    h = await startHarness({ tag: 'stale', sim: { learners: 1000 }, env: WIDE });
    const { runId } = await h.enqueueIds(ids);
    await h.workUntilIdle({ concurrency: 4 });
    const counts = await h.ctx.store.runCounts('acme', runId);
    expect([counts.transferred, counts['not-found']]).toEqual([170, 30]);
    expect((await h.ctx.budget.policy('acme')).paused).toBeNull();
    report('15% stale ids', { calls: transfers(h.sim).length, halted: 0 });
  }, 120_000);
});

describe('per token', () => {
  it('one token without permission among three is paused; the others finish', async () => {
    h = await startHarness({
      tag: 'tokens',
      sim: { learners: 1000, tokens: [...DEFAULT_TOKENS, NO_PERMISSION] },
      env: { ...WIDE, LEARNER_API_TOKENS: 'acme:sim-acme-1,acme:sim-acme-noperm,acme:sim-acme-2' },
    });
    const ids = learnersNotIn('acme', 150);
    const { runId } = await h.enqueueIds(ids);
    await h.workUntilIdle({ concurrency: 4 });
    const bad = tokenRef('acme', 'sim-acme-noperm').id;
    const policy = await h.ctx.budget.policy('acme');
    expect(policy.paused).toBeNull();
    expect(Object.keys(policy.pausedTokens)).toEqual([bad]);
    expect(policy.pausedTokens[bad]?.reason).toMatch(/^(\d+) of the last \1 calls answered 403 forbidden$/);
    const refused = transfers(h.sim).filter((r) => r.status === 403).length;
    const counts = await h.ctx.store.runCounts('acme', runId);
    expect([counts.forbidden, counts.transferred]).toEqual([refused, 150 - refused]);
    expect(refused).toBeLessThanOrEqual(15);
    report('one token of three without permission', { refusedCallsBeforeTokenPause: refused });
  }, 120_000);
});

describe('a 5xx storm', () => {
  it('is probed one call at a time, without attempts, and the run finishes when it ends', async () => {
    h = await startHarness({
      tag: 'storm',
      sim: { learners: 1000, faults: { errorRate: 1, latencyAfterMs: [10, 30] } },
      env: { ...WIDE, ATTEMPTS: '4', BACKOFF: '100ms' },
    });
    const { ctx, sim } = h;
    const ids = learnersNotIn('acme', 60);
    const { runId } = await h.enqueueIds(ids);
    const work = startWorkers(ctx, { orgs: ['acme'], concurrency: 4, untilIdle: true, idleCheckMs: 100 });
    await waitFor(
      'the storm flag',
      () => readSample(ctx.redis, ctx.keys, 'acme'),
      (s) => s.storm,
    );
    const stormAt = Date.now();
    await sleep(3000);
    sim.setFaults({ latencyAfterMs: [10, 30] });
    await work.done;
    const counts = await ctx.store.runCounts('acme', runId);
    expect(counts.transferred).toBe(60);
    // Calls sent during the storm (after the calls in flight when it was set): never two at once.
    const during = transfers(sim).filter((r) => r.receivedAt > stormAt + 500 && r.status === 500);
    expect(during.length).toBeGreaterThan(3);
    const sorted = [...during].sort((a, b) => a.receivedAt - b.receivedAt);
    for (let i = 1; i < sorted.length; i++) {
      expect(sorted[i]?.receivedAt).toBeGreaterThanOrEqual((sorted[i - 1] as RequestRecord).respondedAt ?? 0);
    }
    // The probes used no attempt: the attempts recorded are the calls less the storm's probes.
    let attempts = 0;
    for (const id of ids) attempts += (await ctx.store.get('acme', id))?.a ?? 0;
    expect(attempts).toBeLessThanOrEqual(transfers(sim).length - during.length);
    expect((await ctx.budget.policy('acme')).paused).toBeNull();
    report('5xx storm', { calls: transfers(sim).length, probesDuringStorm: during.length, attempts });
  }, 120_000);
});

describe('a 5xx storm that does not end', () => {
  it('halts the organization after HALT_STORM and its probes, said once by org.halted', async () => {
    receiver = await startReceiver();
    h = await startHarness({
      tag: 'storm-halt',
      sim: { learners: 1000, faults: { errorRate: 1, latencyAfterMs: [5, 15] } },
      env: { ...WIDE, ATTEMPTS: '4', BACKOFF: '100ms', HALT_STORM: '2s' },
    });
    const { ctx, sim } = h;
    const ids = learnersNotIn('acme', 60);
    const { runId } = await h.enqueueIds(ids);
    const notifier = new Notifier(ctx, receiver.url, { retryMs: [50] });
    const started = Date.now();
    const result = await startWorkers(ctx, {
      orgs: ['acme'],
      concurrency: 4,
      untilIdle: true,
      idleCheckMs: 100,
      onHalt: notifier.noteHalt.bind(notifier),
    }).done;
    // The service never answered otherwise: before HALT_STORM there was no halt, after it one, and the
    // process ended (its learners wait for a person's resume) instead of probing for ever.
    expect(result.reason).toBe('halted');
    expect(Date.now() - started).toBeGreaterThanOrEqual(2000);
    const paused = (await ctx.budget.policy('acme')).paused;
    expect(paused?.who).toBe('breaker');
    const m =
      /^a 5xx storm that does not end: the service answered only server errors \(5xx\) for \d+ s, (\d+) probes in a row$/.exec(
        paused?.reason ?? '',
      );
    expect(m, paused?.reason).not.toBeNull();
    expect(Number(m?.[1])).toBeGreaterThanOrEqual(5);
    expect(result.haltedOrgs).toEqual([{ org: 'acme', reason: paused?.reason }]);
    // No call after the halt; every learner waits with its attempts (the probes used none).
    const calls = await settled(sim);
    expect(transfers(sim).every((r) => r.status === 500)).toBe(true);
    expect(progressOf(await ctx.store.runCounts('acme', runId)).waiting).toBe(60);
    await waitFor(
      'org.halted',
      () => receiver?.of('org.halted').length ?? 0,
      (n) => n === 1,
    );
    expect(receiver.of('org.halted')[0]?.body.text).toContain('Check that the service answers again');
    await notifier.stop(1000);
    expect(receiver.of('org.halted')).toHaveLength(1);
    expect(transfers(sim)).toHaveLength(calls);
    report('5xx storm that does not end', { calls, probes: Number(m?.[1]) });
  }, 60_000);
});
