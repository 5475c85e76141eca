// plan and --dry-run: the ETA follows the limits in Redis and the budget already used in the current
// window (ops/eta/eta.ts simulates the limiter from it), learners already queued or done are told apart,
// --tokens says what another number of tokens would change, and nothing is written to a queue, the
// outcome store or a run, and no transfer is called.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { tokensOf } from '../../src/core/config.ts';
import { describeEta, planCsv, planOrgs } from '../../src/ops/intake/plan.ts';
import { crawl } from '../../src/queue/sources/crawl.ts';
import { setLimits } from '../../src/limiter/policy-control.ts';
import { startHarness, type Harness } from '../helpers/pipeline.ts';
import { runCommand } from '../helpers/cli.ts';

let h: Harness;
const DAY = 86_400_000;
const HOUR = 3_600_000;

// Each test gets its own harness (queue, outcome store, budget): the state one test writes is never another's
// premise.
beforeEach(async () => {
  h = await startHarness({
    tag: 'plan',
    sim: { learners: 1000 },
    env: {
      LIMIT_PER_TOKEN: '1000/1h',
      LIMIT_PER_ORG: '1000/1d',
      LOG_LEVEL: 'warn',
      // beta: an organization with nothing spent, for the what-if.
      LEARNER_API_TOKENS: 'acme:sim-acme-1,acme:sim-acme-2,beta:sim-beta-1,beta:sim-beta-2',
    },
  });
  // Spend 388 of today's 1000: 612 left.
  const tokenIds = tokensOf(h.config, 'acme').map((t) => t.id);
  for (let i = 0; i < 388; i++) {
    const p = await h.ctx.budget.acquire('acme', tokenIds);
    if (!p.ok) throw new Error('budget refused while seeding the test');
    await h.ctx.budget.settle('acme', p.tokenId, p.permitId);
  }
});
afterEach(async () => {
  await h?.close();
});

/** 700 jobs of acme waiting in the queue (learners 1..700), as an earlier enqueue would leave them. */
async function seedQueued(): Promise<void> {
  await h.ctx.producer.add(
    Array.from({ length: 700 }, (_, i) => ({ org: 'acme', learnerId: i + 1, source: 'seed' })),
    'seed',
  );
}

/**
 * Keys under the test prefix other than the limiter's (the seeded budget, and the limits policy its first
 * acquire seeded) and the org-id map.
 */
async function writtenKeys(): Promise<string[]> {
  const keys = await h.ctx.redis.keys(`${h.prefix}:*`);
  return keys.filter((k) => !k.includes(':lim:') && k !== h.ctx.keys.policy('acme')).sort();
}

describe('plan', () => {
  it('says when 18,400 learners are done, in 19 windows of a day, and writes nothing', async () => {
    const ids = Array.from({ length: 18_400 }, (_, i) => i + 1);
    const file = h.writeFile('big.csv', `learnerId\n${ids.join('\n')}\n12\nnope\n`);
    const p = await planCsv(h.ctx, { file, defaultOrg: 'acme', knownOrgs: h.config.orgs });
    expect(p.valid).toBe(18_400);
    expect(p.rejected).toBe(2);
    const [acme] = p.plans;
    expect(acme?.text).toMatch(
      /^18,400 learners for acme: done by \d{4}-\d\d-\d\d \d\d:\d\d UTC, in 18 days \(19 windows of 1d\); limited by the organization's budget, 1000\/1d$/,
    );
    expect(acme?.availableNow).toBe(612);
    expect(acme?.periods).toBe(19);
    // 612 now; the 388 spent a moment ago leave with them a day (+ 1 ms) later, then 1000 a day: the
    // last 788 go on the 19th day, 18 x (1 d + 1 ms) from now.
    expect(acme?.eta.ms).toBe(18 * (DAY + 1));
    expect(Math.abs((acme?.eta.finishAt ?? 0) - Date.now() - 18 * DAY)).toBeLessThan(60_000);
    expect(acme?.eta.boundBy).toBe('org');
    expect(await writtenKeys()).toEqual([]);
  });

  it('counts jobs already queued toward the ETA and tells queued and new apart', async () => {
    await h.ctx.runs.create({ id: 'seed', kind: 'csv', source: 'seed', orgs: ['acme'] });
    await seedQueued();
    const plans = await planOrgs(h.ctx, new Map([['acme', Array.from({ length: 1000 }, (_, i) => i + 1)]]));
    const [acme] = plans;
    expect(acme?.alreadyQueued).toBe(700);
    expect(acme?.toEnqueue).toBe(300);
    expect(acme?.backlog).toBe(700);
    // 700 queued + 300 new = 1000 at 612 left today: today and one more day.
    expect(acme?.periods).toBe(2);
    expect(acme?.text).toMatch(
      /^1,000 learners for acme: done by .* UTC, in 1 day \(2 windows of 1d\); limited by the organization's budget, 1000\/1d \(300 to enqueue/,
    );
  });

  it('a dry-run crawl reads the list but writes nothing and calls no transfer', async () => {
    await seedQueued();
    const before = await writtenKeys();
    const s = await crawl(
      {
        redis: h.ctx.redis,
        keys: h.ctx.keys,
        producer: h.ctx.producer,
        runs: h.ctx.runs,
        client: h.ctx.client!,
      },
      { org: 'acme', targetOrgId: 1, tokens: ['sim-acme-1'], filters: { fromOrgId: 3 }, dryRun: true },
    );
    expect(s.selectedIds).toHaveLength(333);
    expect(s.enqueued).toBe(0);
    expect(await writtenKeys()).toEqual(before);
    expect(h.sim.record.some((r) => r.method === 'PATCH')).toBe(false);
    const [acme] = await planOrgs(h.ctx, new Map([['acme', s.selectedIds ?? []]]));
    // Learners 1..700 are queued: 233 of gamma's 333 are among them.
    expect(acme?.alreadyQueued).toBe(233);
    expect(acme?.toEnqueue).toBe(100);
  });

  it('--tokens says what another number of tokens would change: both finishes', async () => {
    // 2 x 10/1h against 1000/1d: the tokens hold the work back; 5 of them move it twice as fast.
    await setLimits(
      h.ctx.redis,
      h.ctx.keys,
      'beta',
      { perToken: { max: 10, windowMs: HOUR } },
      { limitPerToken: h.config.limitPerToken, limitPerOrg: h.config.limitPerOrg },
      'cli:test',
    );
    const ids = Array.from({ length: 100 }, (_, i) => i + 5001);
    const [acme] = await planOrgs(h.ctx, new Map([['beta', ids]]), { tokens: 4 });
    expect(acme?.eta.boundBy).toBe('token');
    expect(acme?.eta.limitedBy).toBe("the tokens' budgets, 10/1h each");
    // 20 an hour, the first batch now: the 5th at 4 h (+ 4 ms). With 4 tokens, 40 an hour: 2 h (+ 2 ms).
    expect(acme?.eta.ms).toBe(4 * (HOUR + 1));
    expect(acme?.whatIf?.eta.ms).toBe(2 * (HOUR + 1));
    expect(acme?.whatIf?.text).toMatch(
      /^with 4 tokens instead of 2: done by .* UTC, in 2 h \(limited by the tokens' budgets, 10\/1h each\), against .* UTC, in 4 h$/,
    );
    const none = describeEta(
      'beta',
      5,
      0,
      await h.ctx.budget.peek(
        'beta',
        tokensOf(h.config, 'beta').map((t) => t.id),
      ),
    );
    expect(none.text).toBe('5 learners for beta: nothing to transfer');
    const file = h.writeFile('what-if.csv', `learnerId\n${ids.join('\n')}\n`);
    const r = await runCommand(['plan', '--csv', file, '--org', 'beta', '--tokens', '4'], h.env);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('    with 4 tokens instead of 2: done by ');
    const bad = await runCommand(['plan', '--csv', file, '--tokens', 'two'], h.env);
    expect(bad.stderr).toContain("--tokens expects a whole number from 1 to 1000, got 'two'");
  });

  it('enqueue --dry-run and plan --crawl print the plan from the CLI', async () => {
    await seedQueued();
    const file = h.writeFile('small.csv', 'learnerId\n2001\n2002\n2003\n');
    const r = await runCommand(['enqueue', '--csv', file, '--org', 'acme', '--dry-run'], h.env);
    expect(r.code).toBe(0);
    // 700 jobs wait ahead of them, 612 left today: they go tomorrow.
    expect(r.stdout).toMatch(
      /3 learners for acme: done by .* UTC, in 1 day \(2 windows of 1d\); limited by the organization's budget, 1000\/1d \(after 700 jobs already in the queue\)/,
    );
    const c = await runCommand(
      ['plan', '--crawl', '--org', 'acme', '--target-org-id', '1', '--from-org', '2', '--quiet'],
      h.env,
    );
    expect(c.code).toBe(0);
    expect(c.stdout).toMatch(/333 learners for acme/);
    // --tokens works with every source: a crawl's plan says what another number of tokens would change.
    const w = await runCommand(
      ['plan', '--crawl', '--org', 'acme', '--from-org', '2', '--quiet', '--tokens', '3'],
      h.env,
    );
    expect(w.code, w.stderr).toBe(0);
    expect(w.stdout).toMatch(/333 learners for acme: done by /);
    expect(w.stdout).toMatch(/\n {4}with 3 tokens instead of \d+: done by .* UTC, in .*, against .* UTC/);
    expect(h.sim.record.some((x) => x.method === 'PATCH')).toBe(false);
  });
});
