// A canary that waits (docs/canary.md), as a person runs it: `enqueue --canary 10` of 100 learners sends
// exactly 10 calls (the simulator's request record) and `work --until-idle` ends with exit 8, saying the
// run waits for approval; `approve --run` releases the other 90. With --auto-approve the rest follows by
// itself; with a canary the simulator refuses (403), the rest stays unapproved, and `cancel --run`
// withdraws it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCommand } from '../helpers/cli.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';
import { EXIT } from '../../src/cli/shared.ts';

let h: Harness;
// Four cohorts of 100 learners outside acme; the simulator refuses the first 10 of the third and the
// first 6 of the fourth.
const cohorts = [0, 1, 2, 3].map((i) => learnersNotIn('acme', 100, 2 + i * 160));
const refused = [...(cohorts[2] ?? []).slice(0, 10), ...(cohorts[3] ?? []).slice(0, 6)];

beforeAll(async () => {
  h = await startHarness({ tag: 'canary', sim: { learners: 800, forbiddenLearnerIds: refused } });
});
afterAll(async () => {
  await h?.close();
});

const cli = (...args: string[]) => runCommand(args, h.env);
const callsFor = (ids: readonly number[]) => {
  const set = new Set(ids);
  return h.sim.record.filter((r) => r.method === 'PATCH' && set.has(r.learnerId ?? -1)).length;
};

async function enqueue(name: string, ids: readonly number[], ...flags: string[]): Promise<string> {
  const file = h.writeFile(name, `learnerId\n${ids.join('\n')}\n`);
  const r = await cli('enqueue', '--csv', file, '--org', 'acme', '--quiet', ...flags);
  expect(r.code, r.stderr).toBe(0);
  const runId = /^run (\S+):/m.exec(r.stdout)?.[1] as string;
  expect(r.stdout).toContain(`canary     the first 10 per organization are sent; 90 wait for approval`);
  return runId;
}

const work = () => cli('work', '--until-idle', '--org', 'acme', '--concurrency', '4');

describe('enqueue --canary', () => {
  it('sends exactly 10 of 100 until approve, then the rest', async () => {
    const ids = cohorts[0] as number[];
    const runId = await enqueue('canary.csv', ids, '--canary', '10');
    const first = await work();
    expect(first.code).toBe(EXIT.awaitingApproval);
    expect(first.stderr).toContain(
      `run ${runId} is waiting for approval after its canary (10 of 10 transferred, 0 failed)`,
    );
    expect(callsFor(ids)).toBe(10);
    expect(await h.ctx.store.runCounts('acme', runId)).toMatchObject({
      transferred: 10,
      'awaiting-approval': 90,
    });
    const status = await cli('status');
    expect(status.stdout).toContain(
      `run ${runId} waiting for approval after its canary (10 of 10 transferred, 0 failed)`,
    );

    const approved = await cli('approve', '--run', runId);
    expect(approved.code, approved.stderr).toBe(0);
    expect(approved.stdout).toContain(`approved run ${runId}: 90 learners released (acme 90)`);
    const changes = await cli('changes', '--org', 'acme');
    expect(changes.stdout).toMatch(
      new RegExp(`cli:\\S+@\\S+  run\\.approve  acme  run ${runId}, released 90`),
    );
    const second = await work();
    expect(second.code).toBe(EXIT.ok);
    expect(callsFor(ids)).toBe(100);
    expect(await h.ctx.store.runCounts('acme', runId)).toMatchObject({ transferred: 100, total: 100 });
  });

  it('--auto-approve releases the rest by itself once the canary finished within the error budget', async () => {
    const ids = cohorts[1] as number[];
    const runId = await enqueue('auto.csv', ids, '--canary', '10', '--auto-approve');
    const r = await work();
    expect(r.code, r.stderr).toBe(EXIT.ok);
    expect(callsFor(ids)).toBe(100);
    expect(await h.ctx.store.runCounts('acme', runId)).toMatchObject({ transferred: 100 });
    const run = await h.ctx.runs.get(runId);
    expect(run?.canary?.approved.acme?.by).toMatch(/^work:/);
    const changes = await cli('changes', '--org', 'acme');
    expect(changes.stdout).toContain(`run ${runId}, released 90`);
    expect(changes.stdout).toContain('auto auto-approved: 0 of 10 judged outcomes of the canary failed');
  });

  it('a failing canary stays unapproved with --auto-approve; cancel --run withdraws the rest', async () => {
    const ids = cohorts[2] as number[];
    const runId = await enqueue('refused.csv', ids, '--canary', '10', '--auto-approve');
    const r = await work();
    expect(r.code).toBe(EXIT.awaitingApproval);
    expect(r.stderr).toContain(
      `run ${runId} is waiting for approval after its canary (0 of 10 transferred, 10 failed)`,
    );
    expect(callsFor(ids)).toBe(10);
    expect(await h.ctx.store.runCounts('acme', runId)).toMatchObject({
      forbidden: 10,
      'awaiting-approval': 90,
    });
    const run = await h.ctx.runs.get(runId);
    expect(run?.canary?.approved.acme).toBeUndefined();
    expect(run?.canary?.refused.acme).toBe('10 of 10 judged outcomes of the canary failed (at least 5 halt)');

    const cancelled = await cli('cancel', '--run', runId);
    expect(cancelled.stdout).toContain(`cancelled 90 learners of run ${runId}, 10 failed already`);
    expect(await h.ctx.store.runCounts('acme', runId)).toMatchObject({ forbidden: 10, cancelled: 90 });
    expect((await h.ctx.store.runCounts('acme', runId))['awaiting-approval'] ?? 0).toBe(0);
    // Nothing of the run waits any more (for a worker or a person): no call is made for it.
    const after = await work();
    expect(after.code).toBe(EXIT.ok);
    expect(callsFor(ids)).toBe(10);
  });

  it('refuses what it cannot do, naming the flag', async () => {
    const file = h.writeFile('usage.csv', `learnerId\n${cohorts[0]?.[0]}\n`);
    const auto = await cli('enqueue', '--csv', file, '--org', 'acme', '--auto-approve');
    expect(auto.code).toBe(EXIT.usage);
    expect(auto.stderr).toContain('--auto-approve needs --canary N');
    const zero = await cli('enqueue', '--csv', file, '--org', 'acme', '--canary', '0');
    expect(zero.code).toBe(EXIT.usage);
    expect(zero.stderr).toContain('--canary');
    const plain = await h.enqueueIds([cohorts[0]?.[1] as number]);
    const notCanary = await cli('approve', '--run', plain.runId);
    expect(notCanary.code).toBe(EXIT.usage);
    expect(notCanary.stderr).toContain('not a canary run');
  });

  it("--auto-approve judges the canary at the organization's own --halt-at, not HALT_AT", async () => {
    // 6 of the canary's 10 refused: at HALT_AT's 50% it would stay unapproved; acme's own 90% lets it go.
    // The refused canary above halted acme through the error budget (10 of 10 forbidden): lifted first.
    if ((await h.ctx.budget.policy('acme')).paused) await cli('resume', '--org', 'acme');
    const set = await cli('limits', 'set', '--org', 'acme', '--halt-at', '90%');
    expect(set.code, set.stderr).toBe(0);
    try {
      const ids = cohorts[3] as number[];
      const runId = await enqueue('own-halt.csv', ids, '--canary', '10', '--auto-approve');
      const r = await work();
      expect(r.code, r.stderr).toBe(EXIT.failures);
      expect(callsFor(ids)).toBe(100);
      expect(await h.ctx.store.runCounts('acme', runId)).toMatchObject({ forbidden: 6, transferred: 94 });
      expect((await h.ctx.runs.get(runId))?.canary?.refused.acme).toBeUndefined();
      const changes = await cli('changes', '--org', 'acme');
      expect(changes.stdout).toContain('auto auto-approved: 6 of 10 judged outcomes of the canary failed');
    } finally {
      await cli('limits', 'set', '--org', 'acme', '--halt-at', '50%');
    }
  });
});
