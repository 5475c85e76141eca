// `cancel` as a person types it: the plain summary, --dry-run, --json, --csv with a bad row named by its
// line, and the usage errors that name the flag. Then the learners cancelled are enqueued again and move.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCommand } from '../helpers/cli.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';
import type { CancelSummary } from '../../src/ops/actions/cancel.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ tag: 'cancel-cli', sim: { learners: 90 } });
});
afterAll(async () => {
  await h?.close();
});

const cancel = (...args: string[]) => runCommand(['cancel', ...args], h.env);

describe('learner-transfer cancel', () => {
  it('--dry-run says what would be cancelled and changes nothing; then the run is cancelled', async () => {
    const ids = learnersNotIn('acme', 6, 2);
    const { runId } = await h.enqueueIds(ids.slice(0, 5));
    // One of the run done already.
    await h.ctx.store.recordAttempt('acme', ids[0] as number, runId, {
      bucket: 'transferred',
      code: 'transferred',
      durationMs: 1,
      countsAsAttempt: true,
    });
    const dry = await cancel('--run', runId, '--dry-run');
    expect(dry.code).toBe(0);
    expect(dry.stdout).toContain(`would cancel 4 learners of run ${runId}, 1 already done`);
    expect(dry.stdout).toContain('dry run: nothing was changed');
    expect((await h.ctx.store.runCounts('acme', runId)).cancelled).toBeUndefined();

    const real = await cancel('--run', runId);
    expect(real.code).toBe(0);
    expect(real.stdout.trim()).toBe(`cancelled 4 learners of run ${runId}, 1 already done`);
    expect((await h.ctx.store.runCounts('acme', runId)).cancelled).toBe(4);
    const status = await runCommand(['status'], h.env);
    expect(status.stdout).toMatch(/learners: .*cancelled 4/);
    // One change-log entry, with who and the counts.
    const changes = await runCommand(['changes', '--org', 'acme'], h.env);
    expect(changes.stdout).toMatch(
      new RegExp(`cli:\\S+@\\S+  cancel  acme  filter run ${runId}, cancelled 4,`),
    );
  });

  it('--learner takes ids comma-separated; --json is the summary for machines', async () => {
    const ids = learnersNotIn('acme', 3, 40);
    await h.enqueueIds(ids.slice(0, 2));
    const r = await cancel('--learner', `${ids[0]},${ids[1]}`, '--learner', '999999', '--json');
    expect(r.code).toBe(0);
    const s = JSON.parse(r.stdout) as CancelSummary;
    expect(s).toMatchObject({ dryRun: false, cancelled: 2, byOrg: { acme: 2 }, inFlight: [] });
    expect(s.notCancellable).toEqual([
      { reason: 'unknown', count: 1, learners: [{ org: '', learnerId: 999_999 }] },
    ]);
    // Named again in a CSV: re-opened and transferred.
    const again = await h.enqueueIds([ids[0] as number]);
    expect(again.summary.enqueued).toBe(1);
    await h.workUntilIdle();
    expect((await h.ctx.store.get('acme', ids[0] as number))?.b).toBe('transferred');
    expect((await h.ctx.store.get('acme', ids[1] as number))?.b).toBe('cancelled');
  });

  it('--csv reads the file as enqueue does and names a bad row by its line', async () => {
    const ids = learnersNotIn('acme', 2, 60);
    await h.enqueueIds(ids);
    const file = h.writeFile('wrong.csv', `learnerId\n${ids[0]}\nabc\n${ids[1]}\n`);
    const r = await cancel('--csv', file, '--org', 'acme');
    expect(r.code).toBe(0);
    expect(r.stderr).toContain(`${file}:3:`);
    expect(r.stdout.trim()).toBe(`cancelled 2 learners of ${file}`);
  });

  it('a usage error names the flag', async () => {
    const none = await cancel();
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('--run ID, --csv FILE or --learner');
    const two = await cancel('--run', 'r-1', '--learner', '5');
    expect(two.code).toBe(2);
    expect(two.stderr).toContain('got --run and --learner');
    const bad = await cancel('--learner', 'abc');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--learner');
    const unknown = await cancel('--run', 'r-nosuch');
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('--run r-nosuch');
  });
});
