// --canary N on the other ways a run is made (docs/canary.md): `retry`, `crawl` and `reconcile`, as a
// person types them, against the real simulator and Redis. Each makes one new run whose first N learners
// per organization are sent and whose others wait for approval; the simulator's request record says
// exactly how many calls were made before and after `approve --run`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../src/cli/shared.ts';
import { DEFAULT_TOKENS } from '../../src/simulator/index.ts';
import { startWorkers } from '../../src/worker/run-workers.ts';
import { runCommand } from '../helpers/cli.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';

const calls = (h: Harness, ids?: readonly number[]) => {
  const set = ids ? new Set(ids) : undefined;
  return h.sim.record.filter(
    (r) => r.method === 'PATCH' && r.learnerId !== undefined && (!set || set.has(r.learnerId)),
  ).length;
};

const runIdOf = (stdout: string) => /^run (\S+):/m.exec(stdout)?.[1];

describe('retry --canary', () => {
  let h: Harness;
  const acme = learnersNotIn('acme', 30, 2);
  const beta = learnersNotIn('beta', 30, 200);
  const noPermission = 'acme:sim-acme-noperm,beta:sim-beta-noperm';
  const good = 'acme:sim-acme-1,beta:sim-beta-1';
  beforeAll(async () => {
    h = await startHarness({
      tag: 'canary-retry',
      sim: {
        learners: 400,
        tokens: [
          ...DEFAULT_TOKENS,
          { token: 'sim-acme-noperm', org: 'acme', canTransfer: false },
          { token: 'sim-beta-noperm', org: 'beta', canTransfer: false },
        ],
      },
      // The error budget would halt these organizations: this test is about the canary alone.
      env: { LEARNER_API_TOKENS: noPermission, HALT_AT: 'off', LOG_LEVEL: 'warn' },
    });
    await h.enqueueIds(acme, 'acme');
    await h.enqueueIds(beta, 'beta');
    const work = startWorkers(h.ctx, {
      orgs: ['acme', 'beta'],
      concurrency: 4,
      untilIdle: true,
      idleCheckMs: 100,
    });
    await work.done;
  }, 60_000);
  afterAll(async () => {
    await h?.close();
  });

  it('one new run of kind retry: the first 5 per organization are sent, the rest wait for approve', async () => {
    expect(calls(h)).toBe(60);
    const env = { ...h.env, LEARNER_API_TOKENS: good };
    // Forbidden learners are what a retry cannot help: a script must say --yes, with a canary too.
    const asked = await runCommand(['retry', '--status', 'forbidden', '--canary', '5'], env);
    expect(asked.code).toBe(EXIT.usage);
    expect(asked.stderr).toContain('--yes');
    expect((await h.ctx.store.get('acme', acme[0] as number))?.b).toBe('forbidden');

    const r = await runCommand(['retry', '--status', 'forbidden', '--canary', '5', '--yes'], env);
    expect(r.code, r.stderr).toBe(0);
    const runId = /approve --run (\S+)'/.exec(r.stdout)?.[1] as string;
    expect(r.stdout).toContain(
      `canary     the first 5 per organization are sent; 50 wait for approval ('learner-transfer approve --run ${runId}')`,
    );
    const run = await h.ctx.runs.get(runId);
    expect(run).toMatchObject({ kind: 'retry', canary: { size: 5, autoApprove: false } });
    expect([...(run?.orgs ?? [])].sort()).toEqual(['acme', 'beta']);
    for (const org of ['acme', 'beta']) {
      expect(await h.ctx.store.runCounts(org, runId)).toMatchObject({ queued: 5, 'awaiting-approval': 25 });
    }

    const first = await runCommand(['work', '--until-idle', '--concurrency', '4'], env);
    expect(first.code, first.stderr).toBe(EXIT.awaitingApproval);
    expect(calls(h)).toBe(60 + 10);
    expect(calls(h, acme)).toBe(30 + 5);
    expect(calls(h, beta)).toBe(30 + 5);
    for (const org of ['acme', 'beta']) {
      expect(await h.ctx.store.runCounts(org, runId)).toMatchObject({
        transferred: 5,
        'awaiting-approval': 25,
      });
    }

    const approved = await runCommand(['approve', '--run', runId], env);
    expect(approved.code, approved.stderr).toBe(0);
    expect(approved.stdout).toContain(`approved run ${runId}: 50 learners released`);
    const second = await runCommand(['work', '--until-idle', '--concurrency', '4'], env);
    expect(second.code, second.stderr).toBe(EXIT.ok);
    expect(calls(h, acme)).toBe(60);
    expect(calls(h, beta)).toBe(60);
    for (const org of ['acme', 'beta']) {
      expect(await h.ctx.store.runCounts(org, runId)).toMatchObject({ transferred: 30, total: 30 });
    }
  }, 120_000);
});

describe('crawl --canary', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ tag: 'canary-crawl', sim: { learners: 60 }, env: { LOG_LEVEL: 'warn' } });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('sends the first 4 of the 20 learners it selects until approve, then the rest', async () => {
    const gamma = [...Array(60).keys()].map((i) => i + 1).filter((id) => (id - 1) % 3 === 2);
    const r = await runCommand(
      ['crawl', '--org', 'acme', '--target-org-id', '1', '--from-org', '3', '--canary', '4', '--quiet'],
      h.env,
    );
    expect(r.code, r.stderr).toBe(0);
    const runId = runIdOf(r.stdout) as string;
    expect(r.stdout).toContain(`canary     the first 4 per organization are sent; 16 wait for approval`);
    expect(await h.ctx.runs.get(runId)).toMatchObject({ kind: 'crawl', canary: { size: 4 } });
    expect(calls(h)).toBe(0);

    const first = await runCommand(['work', '--until-idle', '--org', 'acme', '--concurrency', '4'], h.env);
    expect(first.code, first.stderr).toBe(EXIT.awaitingApproval);
    expect(calls(h)).toBe(4);
    expect(await h.ctx.store.runCounts('acme', runId)).toMatchObject({
      transferred: 4,
      'awaiting-approval': 16,
    });

    const approved = await runCommand(['approve', '--run', runId], h.env);
    expect(approved.stdout).toContain(`approved run ${runId}: 16 learners released (acme 16)`);
    const second = await runCommand(['work', '--until-idle', '--org', 'acme', '--concurrency', '4'], h.env);
    expect(second.code, second.stderr).toBe(EXIT.ok);
    expect(calls(h)).toBe(20);
    expect(calls(h, gamma)).toBe(20);
    expect(gamma.every((id) => h.sim.learner(id)?.organizationId === 1)).toBe(true);
  }, 120_000);
});

describe('reconcile --canary', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({
      tag: 'canary-rec',
      sim: { learners: 90 },
      env: { LEARNER_API_TOKENS: 'acme:sim-acme-1,beta:sim-beta-1', LOG_LEVEL: 'warn' },
    });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('sends the first 3 of the drift per organization until approve, then the rest', async () => {
    // Ten gamma learners desired in acme and ten in beta: twenty learners of drift, in two organizations.
    const gamma = [...Array(60).keys()].map((i) => i + 1).filter((id) => (id - 1) % 3 === 2);
    const toAcme = gamma.slice(0, 10);
    const toBeta = gamma.slice(10, 20);
    const desired = h.writeFile(
      'desired.csv',
      `learnerId,org\n${toAcme.map((id) => `${id},acme`).join('\n')}\n${toBeta.map((id) => `${id},beta`).join('\n')}\n`,
    );
    const r = await runCommand(
      [
        'reconcile',
        '--desired',
        desired,
        '--org-id',
        'acme=1',
        '--org-id',
        'beta=2',
        '--canary',
        '3',
        '--out',
        `${h.dir}/drift`,
        '--quiet',
      ],
      h.env,
    );
    expect(r.code, r.stderr).toBe(0);
    const runId = /approve --run (\S+)'/.exec(r.stdout)?.[1] as string;
    expect(r.stdout).toContain(`canary     the first 3 per organization are sent; 14 wait for approval`);
    expect(await h.ctx.runs.get(runId)).toMatchObject({ canary: { size: 3 } });

    const work = ['work', '--until-idle', '--concurrency', '4'];
    const first = await runCommand(work, h.env);
    expect(first.code, first.stderr).toBe(EXIT.awaitingApproval);
    expect(calls(h, toAcme)).toBe(3);
    expect(calls(h, toBeta)).toBe(3);
    expect(calls(h)).toBe(6);

    const approved = await runCommand(['approve', '--run', runId], h.env);
    expect(approved.stdout).toContain(`approved run ${runId}: 14 learners released`);
    const second = await runCommand(work, h.env);
    expect(second.code, second.stderr).toBe(EXIT.ok);
    expect(calls(h)).toBe(20);
    expect(toAcme.every((id) => h.sim.learner(id)?.organizationId === 1)).toBe(true);
    expect(toBeta.every((id) => h.sim.learner(id)?.organizationId === 2)).toBe(true);
  }, 120_000);
});
