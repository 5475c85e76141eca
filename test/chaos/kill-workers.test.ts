// Several SIGKILLs of worker processes at random moments in one run, two organizations, then a worker
// that finishes: nothing lost, nobody moved twice. No token string anywhere: not in any Redis key or
// value, not in any log line (the CLI children's and the in-process log), not in a report. Each test
// builds its own run on its own harness (own key prefix), so it passes alone and in any order.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { tokenFingerprint } from '../../src/core/config.ts';
import { writeReport } from '../../src/ops/views/report.ts';
import { type CliResult, runCommand, spawnCli, waitExit } from '../helpers/cli.ts';
import { atStake, callsInFlight, expectAtStake, type AtStake } from '../helpers/at-stake.ts';
import { expectOutcomes } from '../helpers/outcomes-check.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';
import { dumpPrefix } from '../helpers/redis.ts';
import { waitUntil } from '../helpers/wait.ts';

// Token strings nobody could mistake for anything else, so a leak of any of them is found.
const SECRETS = {
  acme1: 'chaosSECRET-acme-one-7f3a91c2',
  acme2: 'chaosSECRET-acme-two-b81d44e0',
  beta1: 'chaosSECRET-beta-one-5c02ee19',
};
let h: Harness;
const acmeIds: number[] = [];
const betaIds: number[] = [];
acmeIds.push(...learnersNotIn('acme', 180));
betaIds.push(...learnersNotIn('beta', 60, 601));
// Two ids the service does not know, and two learners already in their organization.
acmeIds.push(990_001, 1, 4);
betaIds.push(990_002);

beforeEach(async () => {
  h = await startHarness({
    tag: 'chaos-kill',
    sim: {
      learners: 900,
      repeatMode: 'mixed',
      tokens: [
        { token: SECRETS.acme1, org: 'acme' },
        { token: SECRETS.acme2, org: 'acme' },
        { token: SECRETS.beta1, org: 'beta' },
      ],
      faults: { latencyAfterMs: [30, 200] },
      limits: {
        perToken: { max: 30, windowMs: 2000 },
        perOrg: { max: 60, windowMs: 2000 },
        window: 'rolling',
      },
    },
    env: {
      LEARNER_API_TOKENS: `acme:${SECRETS.acme1},acme:${SECRETS.acme2},beta:${SECRETS.beta1}`,
      LIMIT_PER_TOKEN: '30/2s',
      LIMIT_PER_ORG: '60/2s',
      REQUEST_TIMEOUT: '1s',
      LOG_LEVEL: 'info',
    },
  });
});
afterEach(async () => {
  await h?.close();
});

/** Fails if any token, or the first 20 characters of one (a secret cut or encoded), is in `text`. */
function expectNoToken(where: string, text: string): void {
  for (const secret of Object.values(SECRETS)) {
    expect(text.includes(secret), `${where} holds a token`).toBe(false);
    expect(text.includes(secret.slice(0, 20)), `${where} holds part of a token`).toBe(false);
  }
}

/** Enqueues learners of both organizations in one run. */
async function enqueueBoth(acme: readonly number[], beta: readonly number[]): Promise<string> {
  const { runId, summary: a } = await h.enqueueIds(acme, 'acme');
  const { summary: b } = await h.enqueueIds(beta, 'beta', { runId });
  expect(a.enqueued + b.enqueued).toBe(acme.length + beta.length);
  return runId;
}

describe('SIGKILL, again and again', () => {
  it('kills workers five times at random moments; a last worker finishes; nothing lost or doubled', async () => {
    await enqueueBoth(acmeIds, betaIds);
    const outputs: CliResult[] = [];
    const ids = [...acmeIds, ...betaIds];
    let workers = [
      spawnCli(['work', '--concurrency', '6'], h.env),
      spawnCli(['work', '--concurrency', '6'], h.env),
    ];
    const stakes: AtStake[] = [];
    for (let kill = 1; kill <= 5; kill++) {
      // A random moment once the workers are busy, then the first one with a call in flight (the limits
      // leave moments with none): each kill meets calls in flight and learners still to move.
      await sleep(300 + Math.floor(Math.random() * 400));
      await waitUntil(`a transfer call in flight for kill ${kill}`, () => callsInFlight(h.sim) > 0, {
        everyMs: 5,
      });
      const victim = Math.floor(Math.random() * workers.length);
      const w = workers[victim] as (typeof workers)[number];
      stakes.push(atStake(h.sim, ids, `SIGKILL ${kill}`));
      w.kill('SIGKILL');
      const r = await waitExit(w);
      expect(r.signal).toBe('SIGKILL');
      outputs.push(r);
      workers = workers.filter((_, i) => i !== victim);
      workers.push(spawnCli(['work', '--concurrency', '6'], h.env));
    }
    for (const s of stakes) expectAtStake(s);
    for (const w of workers) {
      w.kill('SIGKILL');
      outputs.push(await waitExit(w));
    }

    const last = await runCommand(['work', '--until-idle', '--concurrency', '8'], h.env, 120_000);
    outputs.push(last);
    expect(last.stderr).toMatch(/workers stopped \(idle\)/);
    // The two unknown ids end not-found: some learners failed, so exit 1.
    expect(last.code).toBe(1);

    const acme = await expectOutcomes(h.ctx, h.sim, { org: 'acme', ids: acmeIds });
    const beta = await expectOutcomes(h.ctx, h.sim, { org: 'beta', ids: betaIds });
    expect(acme['not-found']).toEqual([990_001]);
    expect(beta['not-found']).toEqual([990_002]);
    expect((acme.transferred?.length ?? 0) + (acme['already-in-org']?.length ?? 0)).toBe(acmeIds.length - 1);
    expect((beta.transferred?.length ?? 0) + (beta['already-in-org']?.length ?? 0)).toBe(betaIds.length - 1);
    expect(acme['already-in-org']).toEqual(expect.arrayContaining([1, 4]));
    expect(h.sim.violations()).toEqual([]);

    // The killed workers' last words and what they left in Redis hold no token either.
    const logs = [...outputs.flatMap((o) => [o.stdout, o.stderr]), ...h.logLines].join('\n');
    expect(logs).toContain('transfer outcome');
    expectNoToken('logs', logs);
    expectNoToken('Redis', (await dumpPrefix(h.ctx.redis, h.prefix)).join('\n'));
  }, 180_000);

  it('no token string in Redis, in any log line or in any report', async () => {
    // A run of its own, worked to the end by a CLI worker, in both organizations: a few learners of
    // each, the unknown ids and those already in place, so that every kind of outcome is in the scan.
    await enqueueBoth(
      [...acmeIds.slice(0, 20), ...acmeIds.slice(-3)],
      [...betaIds.slice(0, 10), ...betaIds.slice(-1)],
    );
    const outputs: CliResult[] = [];
    const work = await runCommand(['work', '--until-idle', '--concurrency', '8'], h.env, 120_000);
    outputs.push(work);
    expect(work.stderr).toMatch(/workers stopped \(idle\)/);
    // The two unknown ids end not-found: exit 1.
    expect(work.code, work.stderr.slice(-2000)).toBe(1);
    const out = join(h.dir, 'reports');
    const csv = await runCommand(['report', '--out', join(out, 'all.csv')], h.env);
    const nd = await runCommand(['report', '--format', 'ndjson', '--out', join(out, 'all.ndjson')], h.env);
    const split = await runCommand(['report', '--split', join(out, 'split')], h.env);
    const status = await runCommand(['status'], h.env);
    const tokens = await runCommand(['tokens', 'list'], h.env);
    for (const r of [csv, nd, split, status, tokens]) expect(r.code, r.stderr).toBe(0);
    outputs.push(csv, nd, split, status, tokens);
    await writeReport(
      h.ctx.store,
      { orgs: ['acme', 'beta'] },
      { format: 'csv', out: join(out, 'in-process.csv') },
    );

    const files = [
      ...readdirSync(out).filter((f) => f !== 'split'),
      ...readdirSync(join(out, 'split')).map((f) => join('split', f)),
    ].map((f) => readFileSync(join(out, f), 'utf8'));
    const reports = files.join('\n');
    const dump = (await dumpPrefix(h.ctx.redis, h.prefix)).join('\n');
    const logs = [...outputs.flatMap((o) => [o.stdout, o.stderr]), ...h.logLines].join('\n');

    // What was scanned is real: the runs' outcomes, job data and log lines are all there.
    expect(files.length).toBeGreaterThanOrEqual(5);
    expect(reports).toContain('transferred');
    expect(dump).toContain('transfers-{acme}');
    expect(logs).toContain('transfer outcome');
    expect(tokens.stdout).toContain(tokenFingerprint(SECRETS.acme1));
    expectNoToken('Redis', dump);
    expectNoToken('logs', logs);
    expectNoToken('reports', reports);
  }, 120_000);
});
