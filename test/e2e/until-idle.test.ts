// work --until-idle decides its exit code from the runs it worked on, not only from the learners it
// finished itself: a nightly job must not exit 0 because another process happened to meet the failure.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCommand } from '../helpers/cli.ts';
import { startHarness, type Harness } from '../helpers/pipeline.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ tag: 'idle', sim: { learners: 60 } });
});
afterAll(async () => {
  await h?.close();
});

describe('work --until-idle exit code', () => {
  it('is 1 when a learner of its run failed in another process, 0 for a run that all succeeded', async () => {
    // An earlier worker meets the failure (999999 does not exist) and finishes the run's first learners.
    const { runId } = await h.enqueueIds([2, 999_999]);
    const first = await h.workUntilIdle();
    expect(first).toMatchObject({ reason: 'idle', failed: 1, runFailures: 1 });

    // More learners join the same run; a nightly worker finishes them, and all of its own succeed.
    await h.enqueueIds([3], 'acme', { runId });
    const nightly = await runCommand(['work', '--until-idle'], h.env, 60_000);
    expect(nightly.stderr).toMatch(
      /1 succeeded, 0 failed; 1 learners of the runs worked on are in a failure state/,
    );
    expect(nightly.code).toBe(1);

    // A new run in which every learner succeeds: exit 0, whatever older runs hold.
    await h.enqueueIds([5, 6]);
    const clean = await runCommand(['work', '--until-idle'], h.env, 60_000);
    expect(clean.stderr).toMatch(/2 succeeded, 0 failed/);
    expect(clean.code).toBe(0);
  });
});
