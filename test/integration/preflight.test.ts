// plan --check against the simulator: a cohort mixing all five classes is classified right, by line of
// the CSV, with list reads only (no transfer call, no queue write).
import { existsSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runPreflight } from '../../src/ops/intake/preflight.ts';
import { applyPreflight } from '../../src/ops/intake/preflight-apply.ts';
import { failurePage } from '../../src/ops/views/failures.ts';
import { selectOutcomes } from '../../src/ops/views/report.ts';
import { progressOf } from '../../src/outcomes/run-progress.ts';
import { readListSnapshot, type CheckClass } from '../../src/queue/sources/list-check.ts';
import { runCommand } from '../helpers/cli.ts';
import { startHarness, type Harness } from '../helpers/pipeline.ts';

let h: Harness;
const N = 300;
const ACME = 1;

/** A cohort of `per` learners of each class (from the simulator's seeded state), and two unknown ids. */
export function cohortOf(harness: Harness, per: number, from = 1): Map<number, CheckClass> {
  const want = new Map<number, CheckClass>();
  const room = (c: CheckClass) => [...want.values()].filter((v) => v === c).length < per;
  for (let id = from; id <= N; id++) {
    const l = harness.sim.learner(id);
    if (!l) continue;
    const cls: CheckClass =
      l.organizationId === ACME
        ? 'in-target'
        : l.userId === null
          ? 'no-user'
          : l.isActive !== 1
            ? 'inactive'
            : 'will-transfer';
    if (room(cls)) want.set(id, cls);
  }
  want.set(N + from + 50, 'unknown');
  want.set(N + from + 51, 'unknown');
  return want;
}

const transferCalls = () => h.sim.record.filter((r) => r.method === 'PATCH');
/** The learners a PATCH was sent for, in id order. */
const patched = () =>
  [...new Set(transferCalls().map((r) => Number(/\/1\/learner\/(\d+)\/transfer/.exec(r.path)?.[1])))].sort(
    (a, b) => a - b,
  );
const byClass = (want: Map<number, CheckClass>, ...classes: CheckClass[]) =>
  [...want]
    .filter(([, c]) => classes.includes(c))
    .map(([id]) => id)
    .sort((a, b) => a - b);

beforeAll(async () => {
  h = await startHarness({
    tag: 'preflight',
    sim: { learners: N },
    env: { LOG_LEVEL: 'warn', LEARNER_API_TOKENS: 'acme:sim-acme-1,acme:sim-acme-2,beta:sim-beta-1' },
  });
});
afterAll(async () => {
  await h?.close();
});

describe('plan --check', () => {
  it('classifies a cohort of all five classes by line, spending no transfer call', async () => {
    const want = cohortOf(h, 4);
    const ids = [...want.keys()];
    for (const c of ['will-transfer', 'in-target', 'unknown', 'no-user', 'inactive'] as const)
      expect([...want.values()].filter((v) => v === c).length, c).toBeGreaterThan(0);
    // A header, then the ids; the first id repeated at the end (the first line is the one reported).
    const csv = h.writeFile('cohort.csv', `learnerId\n${ids.join('\n')}\n${ids[0]}\n`);
    const r = await runPreflight(h.ctx, { csv, org: 'acme', targetOrgId: ACME });

    expect(r.rejected).toBe(1);
    expect(new Map(r.learners.map((l) => [l.learnerId, l.cls]))).toEqual(want);
    for (const c of ['will-transfer', 'in-target', 'no-user', 'inactive'] as const)
      expect(r.counts[c]).toBe(4);
    expect(r.counts.unknown).toBe(2);

    const lines = readFileSync(r.outFile, 'utf8').trim().split('\n');
    expect(r.outFile).toBe(`${h.dir}/cohort.check.csv`);
    expect(lines[0]).toBe('source,learnerId,class,organizationId');
    // Line 1 is the header: learner k of the cohort is on line k + 2.
    ids.forEach((id, k) => {
      const org = h.sim.learner(id)?.organizationId ?? '';
      expect(lines[k + 1]).toBe(`cohort.csv:${k + 2},${id},${want.get(id)},${org}`);
    });
    expect(lines).toHaveLength(ids.length + 1);

    // What will be sent: will-transfer + inactive, and only list reads went out.
    expect(r.plans[0]?.learners).toBe(8);
    expect(transferCalls()).toHaveLength(0);
    expect(r.snapshot.requests).toBe(Math.ceil(N / 100));
    expect(await h.ctx.store.getMany('acme', ids)).toEqual(ids.map(() => undefined));
  });

  it('prints the counts, the snapshot time and the ETA of what is sent (the CLI)', async () => {
    const want = cohortOf(h, 2);
    const csv = h.writeFile('cli.csv', `${[...want.keys()].join('\n')}\n`);
    const out = `${h.dir}/cli-classes.csv`;
    const r = await runCommand(
      ['plan', '--check', '--csv', csv, '--org', 'acme', '--target-org-id', '1', '--out', out],
      h.env,
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/cli\.csv: 10 learners of acme checked against the learner list \(3 list reads/);
    expect(r.stdout).toMatch(/^ {2}will-transfer {2}2$/m);
    expect(r.stdout).toMatch(/^ {2}unknown {8}2$/m);
    expect(r.stdout).toMatch(
      /list read at \d{4}-\d\d-\d\dT[\d:.]+Z: a snapshot, the transfer stays the authority/,
    );
    expect(r.stdout).toMatch(/what will be sent: 4 learners for acme/);
    expect(readFileSync(out, 'utf8').split('\n')).toHaveLength(12);
    expect(await h.ctx.store.getMany('acme', [...want.keys()])).toEqual(
      [...want.keys()].map(() => undefined),
    );
  });

  it('refuses a cohort naming another organization, by line', async () => {
    const csv = h.writeFile('mixed.csv', 'learnerId,org\n5,acme\n6,beta\n');
    await expect(runPreflight(h.ctx, { csv, org: 'acme', targetOrgId: ACME })).rejects.toThrow(
      /mixed\.csv line 3: organization 'beta'/,
    );
  });

  it('--apply spends no call on the skipped, sends the rest, and retry releases a held one', async () => {
    const want = cohortOf(h, 3);
    const ids = [...want.keys()];
    const csv = h.writeFile('apply.csv', `${ids.join('\n')}\n`);
    const before = transferCalls().length;
    const r = await runPreflight(h.ctx, { csv, org: 'acme', targetOrgId: ACME });
    const s = await applyPreflight(h.ctx, r, { csv });
    expect(s.produced.enqueued).toBe(6);
    expect(s.recordedInOrg).toBe(3);
    expect(s.held).toBe(5);

    const inTarget = byClass(want, 'in-target');
    const held = byClass(want, 'unknown', 'no-user');
    const records = await h.ctx.store.getMany('acme', [...inTarget, ...held]);
    records.forEach((rec, i) => {
      expect(rec?.b).toBe(i < inTarget.length ? 'already-in-org' : 'held');
      expect(rec?.src).toBe(`list:${r.snapshot.readAt.toISOString()}`);
      expect(rec?.a).toBe(0);
    });
    const noUser = byClass(want, 'no-user')[0] as number;
    expect((await h.ctx.store.get('acme', noUser))?.m).toMatch(/^no-user: /);
    expect(await h.ctx.store.bucketSize('acme', 'held')).toBe(5);
    expect((await h.ctx.store.runCounts('acme', s.runId)).held).toBe(5);
    // The failures page (the dashboard's) and `report --status held` show them, with why.
    const page = await failurePage(h.ctx.store, { orgs: ['acme'], code: 'held' }, 0, 50);
    expect(page.items.map((o) => o.learnerId).sort((a, b) => a - b)).toEqual(held);
    expect(page.items.find((o) => o.learnerId === noUser)?.message).toMatch(/^no-user: /);
    const reported: number[] = [];
    for await (const o of selectOutcomes(h.ctx.store, { orgs: ['acme'], status: 'held' }))
      reported.push(o.learnerId);
    expect(reported.sort((a, b) => a - b)).toEqual(held);
    expect(progressOf(await h.ctx.store.runCounts('acme', s.runId)).failed).toBe(5);

    await h.workUntilIdle();
    // Calls went only to the sent classes, and each of them is now in the target organization.
    const sent = byClass(want, 'will-transfer', 'inactive');
    expect(transferCalls().slice(before).length).toBe(sent.length);
    expect(patched()).toEqual(sent);
    for (const id of sent) expect(h.sim.learner(id)?.organizationId).toBe(ACME);
    for (const id of byClass(want, 'unknown')) expect(h.sim.learner(id)).toBeUndefined();
    for (const id of byClass(want, 'no-user')) expect(h.sim.learner(id)?.organizationId).not.toBe(ACME);

    // The operator sends the userless one anyway.
    // (through the CLI: `retry --status held` is a choice the retry command offers).
    const retried = await runCommand(
      ['retry', '--status', 'held', '--learner', String(noUser), '--yes'],
      h.env,
    );
    expect(retried.code, retried.stderr).toBe(0);
    expect((await h.ctx.store.get('acme', noUser))?.b).toBe('queued');
    await h.workUntilIdle();
    expect(patched()).toEqual([...sent, noUser].sort((a, b) => a - b));
    expect(h.sim.learner(noUser)?.organizationId).toBe(ACME);
    expect((await h.ctx.store.get('acme', noUser))?.b).toBe('transferred');
    expect(await h.ctx.store.bucketSize('acme', 'held')).toBe(4);
  });

  it('--run: checks the learners of a run still waiting (after the test above: its worker is gone)', async () => {
    const want = cohortOf(h, 2, 200);
    const { runId } = await h.enqueueIds([...want.keys()]);
    const before = transferCalls().length;
    const out = `${h.dir}/run.check.csv`;
    const r = await runPreflight(h.ctx, { runId, org: 'acme', targetOrgId: ACME, out });
    expect(new Map(r.learners.map((l) => [l.learnerId, l.cls]))).toEqual(
      new Map([...want].sort(([a], [b]) => a - b)),
    );
    expect(r.learners[0]?.source).toMatch(/\.csv:\d+$/);
    expect(readFileSync(r.outFile, 'utf8').trim().split('\n')).toHaveLength(want.size + 1);
    expect(transferCalls()).toHaveLength(before);
    // Nothing was written to Redis: every learner is still queued in its run.
    const records = await h.ctx.store.getMany('acme', [...want.keys()]);
    expect(records.map((x) => x?.b)).toEqual([...want.keys()].map(() => 'queued'));
  });

  it('a check stopped midway resumes from its checkpoint, and finds what a whole read finds', async () => {
    const client = h.ctx.client as NonNullable<typeof h.ctx.client>;
    const wanted = new Set([2, 150, 299, N + 7]);
    const base = { client, tokens: ['sim-acme-1'], wanted, concurrency: 1, batchPages: 1, scope: 'acme' };
    const whole = await readListSnapshot(base);
    const checkpoint = `${h.dir}/stop.partial`;
    const stop = new AbortController();
    await expect(
      readListSnapshot({ ...base, checkpoint, signal: stop.signal, onPages: () => stop.abort() }),
    ).rejects.toThrow();
    expect(existsSync(checkpoint)).toBe(true);
    const reads = h.sim.record.length;
    const resumed = await readListSnapshot({ ...base, checkpoint });
    expect(resumed.resumedAt).toBe(2);
    // Pages 2 and 3 only: page 1 is not read again.
    const pages = h.sim.record
      .slice(reads)
      .filter((r) => r.method === 'GET')
      .map((r) => r.page);
    expect(pages.sort()).toEqual([2, 3]);
    expect(resumed.found).toEqual(whole.found);
    expect(resumed.found.size).toBe(3);
    expect(existsSync(checkpoint)).toBe(false);
    // Another set of learners does not resume a checkpoint of these.
    const again = new AbortController();
    await expect(
      readListSnapshot({ ...base, checkpoint, signal: again.signal, onPages: () => again.abort() }),
    ).rejects.toThrow();
    expect(existsSync(checkpoint)).toBe(true);
    const other = await readListSnapshot({ ...base, wanted: new Set([2]), checkpoint });
    expect(other.resumedAt).toBe(1);
    expect(other.found.get(2)).toEqual(whole.found.get(2));
  });
});
