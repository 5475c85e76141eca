// The ETA against a real run: plan and status predict the finish from the limiter's state in Redis
// (limits set there, not this process's LIMIT_*; part of the budget already spent), then the workers
// move the learners through the simulator, and the last transfer call must come within one organization
// window of the prediction. Compressed time: 2 tokens at 20/2s (20 a second: they hold the work back; their
// windows come back three times in the run), the organization at 100/4s.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tokensOf } from '../../src/core/config.ts';
import { setLimits } from '../../src/limiter/policy-control.ts';
import { planCsv } from '../../src/ops/intake/plan.ts';
import { collectStatus } from '../../src/ops/views/status.ts';
import { formatStatus } from '../../src/cli/status.ts';
import { humanizeMs } from '../../src/core/duration.ts';
import { collectOverview, DEFAULT_VIEW } from '../../src/ops/views/overview.ts';
import { runCommand } from '../helpers/cli.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';

const ORG_WINDOW_MS = 4000;
const LEARNERS = 140;
const SPENT = 15;

let h: Harness;
beforeAll(async () => {
  h = await startHarness({
    tag: 'eta-run',
    sim: { learners: 600 },
    // This process's LIMIT_* are not what the fleet follows: the limits in Redis are (set below).
    env: { LIMIT_PER_TOKEN: '100/1s', LIMIT_PER_ORG: '100/1s', CONCURRENCY: '10', LOG_LEVEL: 'warn' },
  });
  await setLimits(
    h.ctx.redis,
    h.ctx.keys,
    'acme',
    { perToken: { max: 20, windowMs: 2000 }, perOrg: { max: 100, windowMs: ORG_WINDOW_MS } },
    { limitPerToken: h.config.limitPerToken, limitPerOrg: h.config.limitPerOrg },
    'cli:test',
  );
});
afterAll(async () => {
  await h?.close();
});

describe('the ETA on a compressed run', () => {
  it('plan and status predict the same finish, and the run ends within one organization window of it', async () => {
    const tokenIds = tokensOf(h.config, 'acme').map((t) => t.id);
    // Part of the windows is spent a moment before: the prediction starts from it.
    for (let i = 0; i < SPENT; i++) {
      const p = await h.ctx.budget.acquire('acme', tokenIds);
      if (!p.ok) throw new Error('budget refused while seeding the test');
      await h.ctx.budget.settle('acme', p.tokenId, p.permitId);
    }
    const ids = learnersNotIn('acme', LEARNERS);
    await h.enqueueIds(ids);
    // The CLI first (it takes a while to start): its prediction is the oldest, the others are made
    // just before the workers start. A prediction assumes the work goes on from the moment it is made.
    const cli = await runCommand(['status', '--json', '--org', 'acme'], h.env);
    const file = h.writeFile('eta.csv', `learnerId\n${ids.join('\n')}\n`);
    const predicting = Date.now();
    const [plan] = (await planCsv(h.ctx, { file, defaultOrg: 'acme', knownOrgs: h.config.orgs })).plans;
    const whole = await collectStatus(h.ctx, ['acme']);
    const [status] = whole.orgs;
    // The dashboard's overview (and /api/overview) reads the same ETA.
    const [card] = (await collectOverview(h.ctx, { ...DEFAULT_VIEW, state: 'all' })).orgs;
    expect(plan?.backlog).toBe(LEARNERS);
    const started = Date.now();
    // Each prediction assumes the work starts when it is made: two made `apart` ms apart may differ by
    // that much (and by the rounding of the windows' start, 1/12 of a token window: 167 ms).
    const apart = started - predicting + 170;
    const result = await h.workUntilIdle({ concurrency: 10 });
    expect(result.failed).toBe(0);

    const calls = h.sim.record.filter((r) => r.method === 'PATCH' && r.status === 200);
    expect(calls).toHaveLength(LEARNERS);
    const finish = Math.max(...calls.map((r) => r.receivedAt));
    const planned = plan?.eta.finishAt ?? NaN;
    const predicted = status?.eta.finishAt ?? NaN;
    const fromCli = JSON.parse(cli.stdout).orgs[0].eta;
    console.log(
      `eta: run of ${LEARNERS} learners took ${finish - started} ms from the workers' start; ` +
        `error of plan ${finish - planned} ms, of status ${finish - predicted} ms, of status --json ` +
        `${finish - fromCli.finishAt} ms (organization window ${ORG_WINDOW_MS} ms)`,
    );
    // Both follow the limits in Redis (100/4s and 20/2s), not this process's LIMIT_* (100/1s).
    expect(status?.eta.limitedBy).toBe("the tokens' budgets, 20/2s each");
    expect(plan?.eta.limitedBy).toBe(status?.eta.limitedBy);
    expect(fromCli.limitedBy).toBe(status?.eta.limitedBy);
    // plan and status agree: one simulation, read a few ms apart.
    expect(Math.abs(planned - predicted)).toBeLessThan(apart);
    expect(Math.abs(fromCli.finishAt - predicted)).toBeLessThan(ORG_WINDOW_MS);
    expect(plan?.eta.windows).toBe(status?.eta.windows);
    expect(formatStatus(whole)).toContain(
      `remaining ${LEARNERS}: done by ${status?.eta.finishUtc}, in ${humanizeMs(status?.eta.ms ?? 0)} ` +
        `(${status?.eta.windows} window${status?.eta.windows === 1 ? '' : 's'} of 4s); ` +
        "limited by the tokens' budgets, 20/2s each",
    );
    expect(card?.eta.limitedBy).toBe(status?.eta.limitedBy);
    expect(Math.abs((card?.eta.finishAt ?? NaN) - predicted)).toBeLessThan(apart);
    // The run ends within one organization window of the prediction.
    expect(Math.abs(finish - planned)).toBeLessThan(ORG_WINDOW_MS);
    expect(Math.abs(finish - predicted)).toBeLessThan(ORG_WINDOW_MS);
    expect(Math.abs(finish - fromCli.finishAt)).toBeLessThan(ORG_WINDOW_MS);
  });
});
