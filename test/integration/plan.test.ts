// plan and --dry-run: the ETA follows the configured limits and the budget already used in the current
// window, learners already queued or done are told apart, and nothing is written to a queue, the
// outcome store or a run, and no transfer is called.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { tokensOf } from '../../src/core/config.ts';
import { describeEta, planCsv, planOrgs } from '../../src/ops/plan.ts';
import { crawl } from '../../src/queue/sources/crawl.ts';
import { startHarness, type Harness } from '../helpers/pipeline.ts';
import { runCommand } from '../helpers/cli.ts';

let h: Harness;
const DAY = 86_400_000;

// Each test gets its own harness (queue, outcome store, budget): the state one test writes is never another's
// premise.
beforeEach(async () => {
  h = await startHarness({
    tag: 'plan',
    sim: { learners: 1000 },
    env: { LIMIT_PER_TOKEN: '1000/1h', LIMIT_PER_ORG: '1000/1d', LOG_LEVEL: 'warn' },
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
  it("says '18,400 learners for acme: 19 days at 1000/day, first day 612 left' and writes nothing", async () => {
    const ids = Array.from({ length: 18_400 }, (_, i) => i + 1);
    const file = h.writeFile('big.csv', `learnerId\n${ids.join('\n')}\n12\nnope\n`);
    const p = await planCsv(h.ctx, { file, defaultOrg: 'acme', knownOrgs: h.config.orgs });
    expect(p.valid).toBe(18_400);
    expect(p.rejected).toBe(2);
    const [acme] = p.plans;
    expect(acme?.text).toBe('18,400 learners for acme: 19 days at 1000/day, first day 612 left');
    expect(acme?.availableNow).toBe(612);
    expect(acme?.periods).toBe(19);
    // (18,400 - 612) / 1000 -> 18 more full days after today.
    expect(acme?.eta.ms).toBe(18 * DAY);
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
      /^1,000 learners for acme: 2 days at 1000\/day, first day 612 left \(300 to enqueue/,
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

  it('words a window that is not a day and a pace set by the tokens', () => {
    const d = describeEta(
      'beta',
      250,
      250,
      1,
      { max: 100, windowMs: 3_600_000 },
      { max: 1000, windowMs: 60_000 },
      100,
    );
    expect(d.eta.boundBy).toBe('token');
    expect(d.text).toBe('250 learners for beta: 3 hours at 1 token x 100/hour, first hour 100 left');
    const none = describeEta(
      'beta',
      5,
      0,
      1,
      { max: 100, windowMs: 4000 },
      { max: 100, windowMs: 4000 },
      100,
    );
    expect(none.text).toBe('5 learners for beta: nothing to transfer');
  });

  it('enqueue --dry-run and plan --crawl print the plan from the CLI', async () => {
    await seedQueued();
    const file = h.writeFile('small.csv', 'learnerId\n2001\n2002\n2003\n');
    const r = await runCommand(['enqueue', '--csv', file, '--org', 'acme', '--dry-run'], h.env);
    expect(r.code).toBe(0);
    // 700 jobs wait ahead of them, 612 left today: they go tomorrow.
    expect(r.stdout).toContain(
      '3 learners for acme: 2 days at 1000/day, first day 612 left (after 700 jobs already in the queue)',
    );
    const c = await runCommand(
      ['plan', '--crawl', '--org', 'acme', '--target-org-id', '1', '--from-org', '2', '--quiet'],
      h.env,
    );
    expect(c.code).toBe(0);
    expect(c.stdout).toMatch(/333 learners for acme/);
    expect(h.sim.record.some((x) => x.method === 'PATCH')).toBe(false);
  });
});
