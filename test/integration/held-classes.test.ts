// Held learners by pre-flight class on the overview: read from the records, and read again only when
// the organization's held count moves (a hold or a release), not at every live interval.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { heldClasses } from '../../src/ops/views/held-classes.ts';
import { newRunId } from '../../src/outcomes/runs.ts';
import { startHarness, type Harness } from '../helpers/pipeline.ts';

let h: Harness;
const runId = newRunId();

async function hold(ids: readonly number[], cls: string): Promise<void> {
  const at = Date.now();
  await h.ctx.store.markQueued(
    ids.map((learnerId) => ({ org: 'acme', learnerId, runId, source: 'list:seed', force: false })),
    at,
  );
  for (const learnerId of ids)
    await h.ctx.store.finish({
      org: 'acme',
      learnerId,
      runId,
      at,
      attemptId: `check:${runId}:${learnerId}`,
      update: { b: 'held', c: 'held', m: `${cls}: held by the pre-flight check`, d: 0, n: 0 },
    });
}

beforeAll(async () => {
  h = await startHarness({ tag: 'held-classes' });
  await h.ctx.runs.create({ id: runId, kind: 'csv', source: 'held.csv', orgs: ['acme'] });
});
afterAll(async () => {
  await h?.close();
});

describe('held classes', () => {
  it('counts held learners by class, reads the records once per held count, and again when it moves', async () => {
    expect(await heldClasses(h.ctx, 'acme', 0)).toBeNull();
    await hold([7001, 7002], 'unknown');
    await hold([7003], 'no-user');
    const reads: string[] = [];
    const getMany = h.ctx.store.getMany.bind(h.ctx.store);
    h.ctx.store.getMany = (org, ids) => {
      reads.push(org);
      return getMany(org, ids);
    };
    expect(await heldClasses(h.ctx, 'acme', 3)).toEqual({ unknown: 2, 'no-user': 1 });
    expect(await heldClasses(h.ctx, 'acme', 3)).toEqual({ unknown: 2, 'no-user': 1 });
    expect(reads).toHaveLength(1);
    await hold([7004], 'no-user');
    expect(await heldClasses(h.ctx, 'acme', 4)).toEqual({ unknown: 2, 'no-user': 2 });
    expect(reads).toHaveLength(2);
  });
});
