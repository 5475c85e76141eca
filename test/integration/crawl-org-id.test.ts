// The target's numeric id, learned from the list: a crawl with --from-org needs no --target-org-id, learns
// the id from a learner this tool moved into the target (a 200, or the 400 "already associated"),
// remembers it for later runs, and says so once; --target-org-id stays an override, and a list that
// disagrees with it is reported, not obeyed.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runCrawl } from '../../src/ops/intake/crawl.ts';
import { OrgIds } from '../../src/queue/org-ids.ts';
import type { OrgIdEvent } from '../../src/queue/sources/crawl-org-id.ts';
import { startHarness, type Harness } from '../helpers/pipeline.ts';
import { runCommand } from '../helpers/cli.ts';

let h: Harness;
const N = 600;
// The simulator's seed: learner i is in organization (i - 1) % 3 + 1; acme is 1.
const ACME = 1;

beforeEach(async () => {
  h = await startHarness({ tag: 'crawl-org-id', sim: { learners: N }, env: { LOG_LEVEL: 'info' } });
});
afterEach(async () => {
  await h?.close();
});

const orgIds = () => new OrgIds(h.ctx.redis, h.ctx.keys);

function crawlAcme(options: {
  fromOrg?: number;
  targetOrgId?: number;
  dryRun?: boolean;
  signal?: AbortSignal;
}) {
  const events: OrgIdEvent[] = [];
  const run = runCrawl(h.ctx, {
    org: 'acme',
    targetOrgId: options.targetOrgId,
    filters: { fromOrgId: options.fromOrg },
    dryRun: options.dryRun ?? false,
    signal: options.signal,
    onOrgId: (e) => events.push(e),
  });
  return { run, events };
}

/** Moves the learners into acme through the real workers and the simulator. */
async function transfer(ids: number[]) {
  await h.enqueueIds(ids);
  await h.workUntilIdle();
}

describe('the target organization id, learned from the list', () => {
  it('crawl --from-org without --target-org-id learns it from a transferred learner, remembers it, says it once', async () => {
    await transfer([2, 3]);
    expect(h.sim.learner(2)?.organizationId).toBe(ACME);
    expect(await orgIds().get('acme')).toBeUndefined();

    const r = await runCommand(['crawl', '--org', 'acme', '--from-org', '2', '--quiet'], h.env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(
      "learned the organization id of 'acme': 1 (learner 2, moved into 'acme' by this tool, is in organization 1 on the list); remembered in Redis",
    );
    expect(r.stdout.match(/learned the organization id/g)).toHaveLength(1);
    expect(await orgIds().get('acme')).toBe(ACME);
    // Every learner still in beta selected; learner 2 (now in acme) is not.
    const beta = Array.from({ length: N }, (_, i) => i + 1).filter(
      (id) => h.sim.learner(id)?.organizationId === 2,
    );
    expect(r.stdout).toMatch(new RegExp(`selected\\s+${beta.length}\\b`));

    // From then on the remembered id is used: a crawl without --from-org or --target-org-id runs, and
    // skips acme's learners as in the target; the list confirms the id, nothing is said about it.
    const all = crawlAcme({});
    const s = await all.run;
    expect(s.summary.targetOrgId).toBe(ACME);
    expect(s.summary.skipped['in-target']).toBe(N / 3 + 2);
    expect(all.events.map((e) => e.kind)).toEqual(['confirmed']);
    expect(s.notes).toEqual([]);
  });

  it('learns it from the 400 "already associated" too; a dry run uses it without remembering it', async () => {
    // Learner 1 is in acme already: the simulator answers 400 "already associated".
    await transfer([1]);
    const [rec] = await h.ctx.store.getMany('acme', [1]);
    expect(rec?.b).toBe('already-in-org');
    const dry = crawlAcme({ fromOrg: 3, dryRun: true });
    const d = await dry.run;
    expect(dry.events).toEqual([{ kind: 'learned', org: 'acme', id: ACME, learnerId: 1, remembered: false }]);
    expect(d.summary.targetOrgId).toBe(ACME);
    expect(await orgIds().get('acme')).toBeUndefined();
    // plan --crawl needs no id either, and says what it learned (not remembered: a plan writes nothing).
    const plan = await runCommand(['plan', '--crawl', '--org', 'acme', '--from-org', '3', '--quiet'], h.env);
    expect(plan.code, plan.stderr).toBe(0);
    expect(plan.stdout).toContain("learned the organization id of 'acme': 1 (learner 1");
    expect(plan.stdout).toContain('not remembered (dry run)');
    expect(await orgIds().get('acme')).toBeUndefined();
    const real = crawlAcme({ fromOrg: 3 });
    await real.run;
    expect(real.events.map((e) => e.kind)).toEqual(['learned']);
    expect(await orgIds().get('acme')).toBe(ACME);
  });

  it('--target-org-id overrides; a list that disagrees is said plainly and the given id is kept', async () => {
    await transfer([2]);
    const c = crawlAcme({ fromOrg: 3, targetOrgId: 7 });
    const s = await c.run;
    expect(c.events).toEqual([
      { kind: 'disagrees', org: 'acme', id: 7, seen: ACME, learnerId: 2, source: 'given' },
    ]);
    expect(s.notes.join('\n')).toContain(
      "the list disagrees with the organization id of 'acme': --target-org-id says 7, but learner 2, moved into 'acme' by this tool, is in organization 1 on the list. 7 is kept; if 1 is right, give --target-org-id 1",
    );
    expect(await orgIds().get('acme')).toBe(7);
    expect(h.logLines.some((l) => l.includes('"level":40') && l.includes('disagrees'))).toBe(true);

    // Given again with another id: what it replaces is said, not silently overwritten.
    const again = await crawlAcme({ fromOrg: 3, targetOrgId: ACME }).run;
    expect(again.notes).toContain(
      "--target-org-id 1 replaces 7, the organization id of 'acme' remembered in Redis",
    );
    expect(await orgIds().get('acme')).toBe(ACME);
  });

  it('with nothing transferred yet: the crawl runs without the id, and one started so resumes once it is known', async () => {
    const abort = new AbortController();
    const events: OrgIdEvent[] = [];
    await expect(
      runCrawl(h.ctx, {
        org: 'acme',
        filters: { fromOrgId: 2 },
        dryRun: false,
        // One page at a time, so the walk is still under way when the abort comes.
        readAhead: 2,
        batchPages: 1,
        signal: abort.signal,
        onOrgId: (e) => events.push(e),
        onProgress: (p) => {
          if (p.pagesDone >= 2) abort.abort();
        },
      }),
    ).rejects.toThrow();
    expect(events).toEqual([]);
    expect(await orgIds().get('acme')).toBeUndefined();
    // Without --from-org the id is needed: the error says how to give it, or to let the crawl learn it.
    await expect(crawlAcme({}).run).rejects.toMatchObject({
      code: 'LT_USAGE',
      message: expect.stringContaining('or crawl with --from-org N, which learns it from the list'),
    });
    // Learned meanwhile (another crawl, say): the same command resumes the crawl started without it.
    await orgIds().set({ acme: ACME });
    const s = await crawlAcme({ fromOrg: 2 }).run;
    expect(s.summary.resumedAt).toBeGreaterThan(1);
    expect(s.summary.selected).toBe(N / 3);
  });

  it('a crawl started for one id does not go on for another', async () => {
    const abort = new AbortController();
    await expect(
      runCrawl(h.ctx, {
        org: 'acme',
        targetOrgId: ACME,
        filters: { fromOrgId: 2 },
        crawlId: 'one-id',
        dryRun: false,
        readAhead: 2,
        batchPages: 1,
        signal: abort.signal,
        onProgress: (p) => {
          if (p.pagesDone >= 2) abort.abort();
        },
      }),
    ).rejects.toThrow();
    const other = runCrawl(h.ctx, {
      org: 'acme',
      targetOrgId: ACME + 100,
      filters: { fromOrgId: 2 },
      crawlId: 'one-id',
      dryRun: false,
    });
    await expect(other).rejects.toMatchObject({
      code: 'LT_USAGE',
      message: expect.stringContaining('is unfinished with other filters'),
    });
  });
});
