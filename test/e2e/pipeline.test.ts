// The main job end to end: a CSV with good, bad and duplicate rows goes in; every valid learner ends
// transferred or already-in-org (or the failure the service gives it); the simulator shows each learner
// changed owner at most once and no limit was exceeded; the report matches the simulator's state.
// The run is built once, by whichever test needs it first (each test passes alone and in any order); the
// tests that read it change nothing in it, and the retry test, which does, has a harness of its own.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueueCsv, type EnqueueCsvSummary } from '../../src/queue/enqueue-csv.ts';
import { newRunId } from '../../src/outcomes/runs.ts';
import { writeReport, writeSplit } from '../../src/ops/views/report.ts';
import { collectStatus } from '../../src/ops/views/status.ts';
import { retryFailed } from '../../src/ops/actions/retry.ts';
import { startWorkers, type WorkResult } from '../../src/worker/run-workers.ts';
import { dumpPrefix } from '../helpers/redis.ts';
import { startHarness, type Harness } from '../helpers/pipeline.ts';

let h: Harness;
const harnesses: Harness[] = [];
// Learners 1..300; learner i belongs to org (i-1)%3: 1=acme, 2=beta, 3=gamma. acme holds 1, 4, 7, ...
const ACME = (id: number) => (id - 1) % 3 === 0;
const transferable = Array.from({ length: 90 }, (_, i) => i + 2).filter(
  (id) => !ACME(id) && id !== 29 && id !== 41,
);
const alreadyInAcme = [1, 4, 7];
const FORBIDDEN = 29;
const FAILING = 41;
const MISSING = 999_999;

async function newHarness(tag: string): Promise<Harness> {
  const harness = await startHarness({
    tag,
    sim: {
      learners: 300,
      forbiddenLearnerIds: [FORBIDDEN],
      failingLearnerIds: [FAILING],
      repeatMode: 'mixed',
      limits: {
        perToken: { max: 20, windowMs: 2000 },
        perOrg: { max: 60, windowMs: 4000 },
        window: 'rolling',
      },
    },
  });
  harnesses.push(harness);
  return harness;
}

beforeAll(async () => {
  h = await newHarness('e2e');
});
afterAll(async () => {
  for (const harness of harnesses) await harness.close();
});

function csvText(): string {
  const rows = ['learnerId,org,comment'];
  for (const id of transferable) rows.push(`${id},acme,ok`);
  rows.push(`${transferable[0]},acme,duplicate`);
  rows.push('abc,acme,letters');
  rows.push('-5,acme,negative');
  rows.push('2.5,acme,decimal');
  rows.push(',acme,empty');
  rows.push('77,nowhere,unknown org');
  for (const id of alreadyInAcme) rows.push(`${id},acme,already`);
  rows.push(`${FORBIDDEN},acme,forbidden`);
  rows.push(`${FAILING},acme,always 500`);
  rows.push(`${MISSING},acme,missing`);
  return `${rows.join('\r\n')}\r\n`;
}

interface Built {
  runId: string;
  file: string;
  rejectsFile: string;
  enqueued: EnqueueCsvSummary;
  worked: WorkResult;
}

/** The cohort enqueued into a run of its own and worked until idle. */
async function build(harness: Harness): Promise<Built> {
  const runId = newRunId();
  const file = harness.writeFile(`cohort-${runId}.csv`, `\ufeff${csvText()}`);
  await harness.ctx.runs.create({ id: runId, kind: 'csv', source: 'cohort.csv', orgs: [] });
  const rejectsFile = join(harness.dir, `rejects-${runId}.csv`);
  const enqueued = await enqueueCsv(
    { producer: harness.ctx.producer, runs: harness.ctx.runs },
    { file, knownOrgs: harness.config.orgs, runId, rejectsFile },
  );
  const worked = await startWorkers(harness.ctx, {
    orgs: ['acme'],
    concurrency: 10,
    untilIdle: true,
    idleCheckMs: 200,
  }).done;
  return { runId, file, rejectsFile, enqueued, worked };
}

let shared: Promise<Built> | undefined;
/** The shared run, built by the first test that asks for it. */
const built = (): Promise<Built> => (shared ??= build(h));

describe('CSV to outcomes', () => {
  it('enqueues the valid rows and rejects the rest with line numbers', async () => {
    const { enqueued: s, rejectsFile } = await built();
    const valid = transferable.length + alreadyInAcme.length + 3;
    expect(s.valid).toBe(valid);
    expect(s.enqueued).toBe(valid);
    expect(s.rejected).toBe(6);
    const rejects = readFileSync(rejectsFile, 'utf8');
    const dupLine = transferable.length + 2; // header is line 1
    expect(rejects).toContain(`${dupLine},duplicate of line 2`);
    expect(rejects).toContain(`${dupLine + 1},learner id 'abc' is not a number`);
    expect(rejects).toContain(`${dupLine + 2},learner id '-5' is negative`);
    expect(rejects).toContain(`${dupLine + 3},learner id '2.5' is not a whole number`);
    expect(rejects).toContain(`${dupLine + 4},learner id is empty`);
    expect(rejects).toContain(`${dupLine + 5},organization 'nowhere' has no token in LEARNER_API_TOKENS`);
  });

  it('workers finish every learner in a known final state, within the limits', async () => {
    const { runId, worked: result } = await built();
    expect(result.reason).toBe('idle');
    expect(result.failed).toBe(3); // forbidden, not-found, and the always-500 after its attempts
    expect(result.succeeded).toBe(transferable.length + alreadyInAcme.length);

    for (const id of transferable) {
      const r = await h.ctx.store.get('acme', id);
      expect(r?.b, `learner ${id}`).toBe('transferred');
      expect(h.sim.ownerChanges(id), `learner ${id}`).toBe(1);
      expect(h.sim.learner(id)?.organizationId).toBe(1);
      expect(r?.x).toBe(h.sim.transfersOf(id)[0]?.data.transferDetails.transferId);
    }
    for (const id of alreadyInAcme) {
      expect((await h.ctx.store.get('acme', id))?.b).toBe('already-in-org');
      expect(h.sim.ownerChanges(id)).toBe(0);
    }
    expect((await h.ctx.store.get('acme', FORBIDDEN))?.b).toBe('forbidden');
    expect((await h.ctx.store.get('acme', MISSING))?.b).toBe('not-found');
    const failing = (await h.ctx.store.getWithStory('acme', FAILING))?.record;
    expect(failing?.b).toBe('server-error');
    expect(failing?.a).toBe(4);
    expect(failing?.h?.map((e) => e[1])).toEqual([
      'server-error',
      'server-error',
      'server-error',
      'server-error',
    ]);

    expect(h.sim.violations()).toEqual([]);
    expect(h.sim.record.filter((r) => r.status === 429)).toEqual([]);
    const counts = await h.ctx.store.runCounts('acme', runId);
    expect(counts).toMatchObject({
      transferred: transferable.length,
      'already-in-org': 3,
      forbidden: 1,
      'not-found': 1,
      'server-error': 1,
    });
  });

  it('keeps the audit record of every transfer: groups and revoked authorizations', async () => {
    await built();
    const id = transferable[0] as number;
    const r = (await h.ctx.store.getWithStory('acme', id))?.record;
    const [entry] = await h.ctx.store.auditEntries('acme', r?.au ?? []);
    const simBody = h.sim.transfersOf(id)[0];
    expect(entry?.transferId).toBe(simBody?.data.transferDetails.transferId);
    expect(entry?.result).toEqual(JSON.parse(JSON.stringify(simBody?.data)));
  });

  it('the report matches the simulator state, and the split files add up', async () => {
    const { runId } = await built();
    const out = join(h.dir, 'report.csv');
    const rows = await writeReport(h.ctx.store, { orgs: ['acme'], runId }, { format: 'csv', out });
    expect(rows).toBe(transferable.length + 6);
    const lines = readFileSync(out, 'utf8').trim().split('\n');
    expect(lines[0]).toBe(
      'org,learnerId,outcome,state,httpStatus,error,message,attempts,transferId,runId,source,enqueuedAt,updatedAt,tokenId',
    );
    for (const line of lines.slice(1)) {
      const [, learnerId, outcome] = line.split(',');
      const id = Number(learnerId);
      if (outcome === 'transferred') expect(h.sim.learner(id)?.organizationId).toBe(1);
    }
    const split = await writeSplit(h.ctx.store, { orgs: ['acme'], runId }, join(h.dir, 'split'));
    expect(split).toMatchObject({ successes: transferable.length + 3, failures: 3, pending: 0 });
  });

  it('the same file again enqueues nothing new', async () => {
    const { file } = await built();
    const s = await enqueueCsv(
      { producer: h.ctx.producer, runs: h.ctx.runs },
      { file, knownOrgs: h.config.orgs, runId: newRunId(), rejectsFile: join(h.dir, 'rejects2.csv') },
    );
    expect(s.enqueued).toBe(0);
    expect(s.alreadyDone).toMatchObject({ transferred: transferable.length, forbidden: 1 });
    expect((await h.ctx.queues.get('acme').getJobCounts('waiting')).waiting).toBe(0);
  });

  it('retry re-queues the failures with fresh attempts, in their own run', async () => {
    // It changes what it retries: a harness and a run of its own, with the failure and a learner it
    // must leave alone.
    const own = await newHarness('e2e-retry');
    const { runId } = await own.enqueueIds([FAILING, transferable[0] as number]);
    const first = await own.workUntilIdle({ concurrency: 5 });
    expect(first).toMatchObject({ reason: 'idle', failed: 1, succeeded: 1 });
    expect((await own.ctx.store.get('acme', FAILING))?.a).toBe(4);

    const s = await retryFailed(own.ctx, { orgs: ['acme'], status: 'server-error' });
    expect(s.requeued).toBe(1);
    expect((await own.ctx.store.get('acme', FAILING))?.b).toBe('queued');
    expect((await own.ctx.store.runCounts('acme', runId))['server-error'] ?? 0).toBe(0);
    const handle = startWorkers(own.ctx, {
      orgs: ['acme'],
      concurrency: 5,
      untilIdle: true,
      idleCheckMs: 200,
    });
    const result = await handle.done;
    expect(result).toMatchObject({ reason: 'idle', failed: 1, succeeded: 0 });
    const after = await own.ctx.store.get('acme', FAILING);
    // The service still fails this learner: four fresh attempts (eight in all), then final again.
    expect(after?.b).toBe('server-error');
    expect(after?.a).toBe(8);
    expect(after?.r).toBe(runId);
    expect((await own.ctx.store.runCounts('acme', runId))['server-error']).toBe(1);
    // The learner that succeeded was not touched: one call, still transferred.
    expect((await own.ctx.store.get('acme', transferable[0] as number))?.b).toBe('transferred');
    expect(own.sim.record.filter((r) => r.learnerId === transferable[0]).length).toBe(1);
  });

  it('status shows counts, budgets and an ETA', async () => {
    await built();
    const st = await collectStatus(h.ctx);
    const acme = st.orgs.find((o) => o.org === 'acme');
    expect(acme?.remaining).toBe(0);
    expect(acme?.budget.tokens).toHaveLength(2);
    expect(acme?.budget.org.limit).toBe(60);
    expect(acme?.eta.text).toBe('nothing left');
  });

  it('no token in Redis or in the logs', async () => {
    await built();
    const dump = (await dumpPrefix(h.ctx.redis, h.prefix)).join('\n');
    expect(dump.length).toBeGreaterThan(1000);
    const logs = h.logLines.join('');
    expect(logs).toContain('transfer outcome');
    for (const secret of ['sim-acme-1', 'sim-acme-2']) {
      expect(dump).not.toContain(secret);
      expect(logs).not.toContain(secret);
    }
  });
});
