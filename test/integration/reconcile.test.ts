// reconcile against the simulator: the drift (learners not where the desired file puts them) is
// enqueued exactly, finished learners that moved away are re-opened on purpose, learners absent from
// the list are reported and not enqueued, and the drift report says so line by line.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { LearnerApiClient } from '../../src/api/client.ts';
import { jobIdOf } from '../../src/queue/job.ts';
import { runReconcile } from '../../src/ops/intake/reconcile.ts';
import { reconcile } from '../../src/queue/sources/reconcile.ts';
import { startPageOneServer } from '../helpers/page-one-server.ts';
import { startWorkers } from '../../src/worker/run-workers.ts';
import { startHarness, type Harness } from '../helpers/pipeline.ts';

let h: Harness;
const ORG_IDS = { acme: 1, beta: 2 };
// Learners 1..90: acme wants 1..60, beta wants 61..90. Learner i sits in org (i-1)%3+1.
const wantAcme = Array.from({ length: 60 }, (_, i) => i + 1);
const wantBeta = Array.from({ length: 30 }, (_, i) => i + 61);
const MISSING = [50_001, 50_002];
const inOrg = (id: number) => ((id - 1) % 3) + 1;

function desiredCsv(): string {
  const rows = ['learnerId,org'];
  for (const id of wantAcme) rows.push(`${id},acme`);
  for (const id of wantBeta) rows.push(`${id},beta`);
  for (const id of MISSING) rows.push(`${id},acme`);
  rows.push('7,beta'); // conflicts with line 8 (7,acme): rejected
  rows.push('abc,acme');
  return `${rows.join('\n')}\n`;
}

async function jobIds(org: string): Promise<number[]> {
  const jobs = await h.ctx.queues.get(org).getJobs(['waiting', 'delayed', 'prioritized']);
  return jobs.map((j) => j.data.learnerId).sort((a, b) => a - b);
}

describe('reconcile', () => {
  // A harness per test: one test's transfers and reconciles are never another's premise.
  beforeEach(async () => {
    h = await startHarness({
      tag: 'reconcile',
      sim: { learners: 300 },
      env: {
        LEARNER_API_TOKENS: 'acme:sim-acme-1,acme:sim-acme-2,beta:sim-beta-1',
        LIMIT_PER_TOKEN: '200/2s',
        LIMIT_PER_ORG: '400/2s',
        LOG_LEVEL: 'warn',
      },
    });
  });
  afterEach(async () => {
    await h?.close();
  });
  let file: string;
  beforeEach(() => {
    file = h.writeFile('desired.csv', desiredCsv());
  });
  const driftAcme = wantAcme.filter((id) => inOrg(id) !== 1);
  const driftBeta = wantBeta.filter((id) => inOrg(id) !== 2);

  it('enqueues exactly the drift, reports the missing, rejects the conflicting rows', async () => {
    const s = await runReconcile(h.ctx, { file, orgIds: ORG_IDS, outDir: join(h.dir, 'r1') });
    expect(s.desired).toBe(wantAcme.length + wantBeta.length + MISSING.length);
    expect(s.rejected).toBe(2);
    expect(s.wrongOrg).toBe(driftAcme.length + driftBeta.length);
    expect(s.notFound).toBe(2);
    expect(s.inPlace).toBe(wantAcme.length - driftAcme.length + wantBeta.length - driftBeta.length);
    expect(s.enqueued).toBe(s.wrongOrg);
    expect(s.byOrg).toEqual({ acme: driftAcme.length, beta: driftBeta.length });
    expect(await jobIds('acme')).toEqual(driftAcme);
    expect(await jobIds('beta')).toEqual(driftBeta);
    const report = readFileSync(s.driftFile as string, 'utf8')
      .trim()
      .split('\n');
    expect(report[0]).toBe('learnerId,line,kind,desiredOrg,desiredOrgId,currentOrgId,stateBefore,action');
    expect(report.filter((l) => l.includes(',wrong-org,'))).toHaveLength(s.wrongOrg);
    expect(report).toContain('50001,92,not-found,acme,1,,,reported');
    expect(report).toContain('2,3,wrong-org,acme,1,2,,enqueued');
    const summary = JSON.parse(readFileSync(s.summaryFile as string, 'utf8')) as { wrongOrg: number };
    expect(summary.wrongOrg).toBe(s.wrongOrg);
    const run = await h.ctx.runs.get(s.runId as string);
    expect(run?.kind).toBe('reconcile');
    expect(h.sim.record.some((r) => r.method === 'PATCH')).toBe(false);
  });

  it('after the transfers, a reconcile finds no drift; a learner moved away again is re-opened on purpose', async () => {
    const first = await runReconcile(h.ctx, { file, orgIds: ORG_IDS, outDir: join(h.dir, 'r1') });
    expect(first.enqueued).toBe(driftAcme.length + driftBeta.length);
    const handle = startWorkers(h.ctx, {
      orgs: ['acme', 'beta'],
      concurrency: 8,
      untilIdle: true,
      idleCheckMs: 100,
    });
    const result = await handle.done;
    expect(result.failed).toBe(0);
    for (const id of driftAcme) expect(h.sim.learner(id)?.organizationId).toBe(1);

    const runsBefore = (await h.ctx.runs.list(1000)).length;
    const clean = await runReconcile(h.ctx, { file, orgIds: ORG_IDS, outDir: join(h.dir, 'r2') });
    expect(clean.wrongOrg).toBe(0);
    expect(clean.enqueued).toBe(0);
    // Nothing to enqueue: no run. The learners not found and the refused rows still differ: reported.
    expect(clean.runId).toBeNull();
    expect(readFileSync(clean.driftFile as string, 'utf8')).toContain(',not-found,');
    // A file that says where every learner already is: no drift, no run, no report at all.
    const inPlace = h.writeFile('in-place.csv', `learnerId,org\n${driftAcme.join(',acme\n')},acme\n`);
    const none = await runReconcile(h.ctx, {
      file: inPlace,
      orgIds: ORG_IDS,
      reportDir: join(h.dir, 'none'),
    });
    expect(none).toMatchObject({
      runId: null,
      driftFile: null,
      summaryFile: null,
      inPlace: driftAcme.length,
    });
    expect(existsSync(join(h.dir, 'none'))).toBe(false);
    expect((await h.ctx.runs.list(1000)).length).toBe(runsBefore);

    // Learner 2 was transferred into acme by the run above (its record is final: transferred). Someone
    // moves it back to beta: the next reconcile must transfer it again, not keep the old record.
    expect((await h.ctx.store.get('acme', 2))?.b).toBe('transferred');
    const back = await h.ctx.client?.transferLearner(2, 'sim-beta-1');
    expect(back?.code).toBe('transferred');
    // DRIFT_REPORT_DIR (reportDir): a directory per reconcile, its report named on the run.
    const reports = join(h.dir, 'reports');
    const again = await runReconcile(h.ctx, { file, orgIds: ORG_IDS, reportDir: reports });
    expect(again.driftFile).toBe(join(reports, again.runId as string, 'drift.csv'));
    expect((await h.ctx.runs.get(again.runId as string))?.driftReport).toBe(again.driftFile);
    expect(again.wrongOrg).toBe(1);
    expect(again.enqueued).toBe(1);
    expect(await h.ctx.queues.get('acme').getJob(jobIdOf(2))).toBeDefined();
    const report = readFileSync(again.driftFile as string, 'utf8');
    expect(report).toContain('2,3,wrong-org,acme,1,2,transferred,enqueued');
    expect((await h.ctx.store.get('acme', 2))?.b).toBe('queued');
  });

  it('fails loudly when the service ignores ?page=, instead of reporting page 2 and on as not found', async () => {
    const server = await startPageOneServer(250);
    const client = new LearnerApiClient({
      baseUrl: server.url,
      userAgent: 'x',
      requestTimeoutMs: 1000,
      connectTimeoutMs: 500,
    });
    // Learner 150 is on page 2: read as page 1 again, it would look absent from the list.
    const desired = h.writeFile('page-one.csv', 'learnerId,org\n5,acme\n150,acme\n');
    const outDir = join(h.dir, 'page-one');
    try {
      await expect(
        reconcile(
          { producer: h.ctx.producer, runs: h.ctx.runs, store: h.ctx.store, client },
          { file: desired, knownOrgs: ['acme'], orgIds: { acme: 1 }, tokens: ['t'], outDir },
        ),
      ).rejects.toMatchObject({
        code: 'LT_INPUT_UNREADABLE',
        message: expect.stringMatching(
          /^listing learners: asked for page [23], the service answered current_page 1/,
        ),
      });
      expect([...server.asked].sort()).toEqual(['1', '2', '3']);
      // Nothing was enqueued and no drift report claims learner 150 is missing.
      expect(await h.ctx.queues.get('acme').getJob(jobIdOf(5))).toBeUndefined();
      expect(existsSync(outDir)).toBe(false);
    } finally {
      await client.close();
      await server.close();
    }
  });

  it('names the missing organization id and how to give it', async () => {
    const other = h.writeFile('gamma.csv', 'learnerId,org\n5,acme\n');
    await h.ctx.redis.del(h.ctx.keys.orgIds());
    await expect(runReconcile(h.ctx, { file: other })).rejects.toThrow(/--org-id acme=N/);
  });
});

describe('reconcile of a large drift', () => {
  let big: Harness;
  beforeAll(async () => {
    big = await startHarness({ tag: 'reconcile-big', sim: { learners: 3300 }, env: { LOG_LEVEL: 'warn' } });
  });
  afterAll(async () => {
    await big?.close();
  });

  it('keeps every drift row, in file order, with the state before of learners past the first 1000', async () => {
    const ids = Array.from({ length: 3300 }, (_, i) => i + 1);
    const drift = ids.filter((id) => inOrg(id) !== 1);
    expect(drift).toHaveLength(2200);
    // Learners at drift positions 1000..1004 and 2199 already have a record (queued) before the reconcile.
    const held = [...drift.slice(1000, 1005), drift[2199] as number];
    await big.enqueueIds(held);
    const file = big.writeFile(
      'all-acme.csv',
      `learnerId,org\n${ids.map((id) => `${id},acme`).join('\n')}\n`,
    );
    const s = await runReconcile(big.ctx, { file, orgIds: { acme: 1 }, outDir: join(big.dir, 'big') });
    expect(s.wrongOrg).toBe(2200);
    expect(s.byOrg).toEqual({ acme: 2200 });
    expect(s.enqueued + s.alreadyQueued).toBe(2200);
    const rows = readFileSync(s.driftFile as string, 'utf8')
      .trim()
      .split('\n')
      .slice(1);
    expect(rows.map((r) => Number(r.split(',')[0]))).toEqual(drift);
    const before = new Map(rows.map((r) => [Number(r.split(',')[0]), r.split(',')[6]]));
    for (const id of drift) expect(before.get(id), `learner ${id}`).toBe(held.includes(id) ? 'queued' : '');
  });
});
