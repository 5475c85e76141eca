// The way back (docs/undo.md): each learner's previous organization is kept where the tool read the list
// (plan --check --apply, crawl, reconcile) and through retries; `report --reverse DIR` writes what moving
// a run back takes, and the files it writes move every learner back on the simulator, with regrant.csv
// holding exactly the authorizations the simulator revoked (from the stream and the archive).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuditArchiver } from '../../src/ops/audit-archive.ts';
import { applyPreflight } from '../../src/ops/preflight-apply.ts';
import { runPreflight } from '../../src/ops/preflight.ts';
import { runReconcile } from '../../src/ops/reconcile.ts';
import { REGRANT_COLUMNS } from '../../src/ops/reverse.ts';
import { AuditStream } from '../../src/outcomes/audit-stream.ts';
import { DEFAULT_ORGANIZATIONS, DEFAULT_TOKENS } from '../../src/simulator/defaults.ts';
import { runCommand } from '../helpers/cli.ts';
import { startHarness, type Harness } from '../helpers/pipeline.ts';

let h: Harness;
const N = 150;
const ORG_ID = { acme: 1, beta: 2, gamma: 3 } as const;
const BY_ID = new Map<number, string>(Object.entries(ORG_ID).map(([k, v]) => [v, k]));

beforeAll(async () => {
  h = await startHarness({
    tag: 'reverse',
    sim: {
      learners: N,
      // gamma gets a token that may transfer: the way back into gamma needs one.
      tokens: [...DEFAULT_TOKENS, { token: 'sim-gamma-1', org: 'gamma' }],
      organizations: [...DEFAULT_ORGANIZATIONS],
    },
    env: {
      LOG_LEVEL: 'warn',
      LEARNER_API_TOKENS: 'acme:sim-acme-1,acme:sim-acme-2,beta:sim-beta-1,gamma:sim-gamma-1',
    },
  });
  h.env.AUDIT_ARCHIVE_DIR = join(h.dir, 'archive');
});
afterAll(async () => {
  await h?.close();
});

/** Learners of beta and gamma with a user attached, from `from` up: a transfer into acme moves them. */
function cohort(count: number, from: number): number[] {
  const ids: number[] = [];
  for (let id = from; ids.length < count && id <= N; id++) {
    const l = h.sim.learner(id);
    if (l && l.organizationId !== ORG_ID.acme && l.userId !== null) ids.push(id);
  }
  return ids;
}

const csvRows = (path: string) =>
  readFileSync(path, 'utf8')
    .trim()
    .split('\n')
    .map((l) => l.split(','));

const mode = (path: string) => statSync(path).mode & 0o777;

describe('report --reverse: a round trip on the simulator', () => {
  it('moves a cohort of beta and gamma into acme, writes the reverse, and the files move every learner back', async () => {
    const first = cohort(12, 2);
    const second = cohort(12, 40);
    const plain = cohort(2, 80);
    const before = new Map(
      [...first, ...second, ...plain].map((id) => [id, h.sim.learner(id)?.organizationId]),
    );
    expect(new Set(before.values())).toEqual(new Set([ORG_ID.beta, ORG_ID.gamma]));

    // 1. The first half: plan --check --apply (the CLI), worked, then its audit moved to the archive.
    const csv1 = h.writeFile('first.csv', `learnerId\n${first.join('\n')}\n`);
    const applied = await runCommand(
      ['plan', '--check', '--csv', csv1, '--org', 'acme', '--target-org-id', '1', '--apply', '--quiet'],
      h.env,
    );
    expect(applied.code, applied.stderr).toBe(0);
    const runId = /applied as run (\S+):/.exec(applied.stdout)?.[1] ?? '';
    expect(runId).not.toBe('');
    await h.workUntilIdle();
    const pass = await new AuditArchiver(h.ctx.redis, h.ctx.keys, {
      dir: h.env.AUDIT_ARCHIVE_DIR ?? '',
    }).runOnce();
    expect(pass.archived).toBeGreaterThanOrEqual(first.length);

    // 2. The second half in the same run (checked again), and two learners enqueued from a plain CSV: the
    // tool never read where those were.
    const csv2 = h.writeFile('second.csv', `learnerId\n${second.join('\n')}\n`);
    const checked = await runPreflight(h.ctx, { csv: csv2, org: 'acme', targetOrgId: ORG_ID.acme });
    await applyPreflight(h.ctx, checked, { csv: csv2, runId });
    await h.enqueueIds(plain, 'acme', { runId });
    await h.workUntilIdle();
    for (const id of before.keys()) expect(h.sim.learner(id)?.organizationId).toBe(ORG_ID.acme);
    // Some of the transfers' audit is only in the archive now, the rest only in the stream.
    const stream = await new AuditStream(h.ctx.redis, h.ctx.keys).read('acme', '', '+', 1000);
    const inStream = new Set(stream.map((e) => Number(e.fields.learnerId)));
    expect(first.some((id) => inStream.has(id))).toBe(false);
    expect(second.every((id) => inStream.has(id))).toBe(true);

    // 3. The reverse.
    const dir = join(h.dir, 'reverse');
    const rev = await runCommand(
      ['report', '--reverse', dir, '--run', runId, '--org-id', 'beta=2', '--org-id', 'gamma=3'],
      h.env,
    );
    expect(rev.code, rev.stderr).toBe(0);
    expect(rev.stdout).toMatch(/enqueue --csv .*move-back-beta\.csv --move/);
    expect(readdirSync(dir).sort()).toEqual([
      'check-by-hand.csv',
      'move-back-beta.csv',
      'move-back-gamma.csv',
      'regrant.csv',
      'unknown.csv',
    ]);
    for (const f of readdirSync(dir)) expect(mode(join(dir, f)), f).toBe(0o600);
    for (const key of ['beta', 'gamma'] as const) {
      const rows = csvRows(join(dir, `move-back-${key}.csv`));
      expect(rows[0]).toEqual(['learnerId', 'org']);
      const want = [...first, ...second].filter((id) => before.get(id) === ORG_ID[key]).sort((a, b) => a - b);
      expect(rows.slice(1)).toEqual(want.map((id) => [String(id), key]));
    }
    const unknown = csvRows(join(dir, 'unknown.csv'));
    expect(
      unknown
        .slice(1)
        .map((r) => Number(r[1]))
        .sort((a, b) => a - b),
    ).toEqual(plain);
    expect(csvRows(join(dir, 'check-by-hand.csv'))).toHaveLength(1);

    // regrant.csv: exactly what the simulator revoked from the learners moved back, none of the others'.
    const regrant = readFileSync(join(dir, 'regrant.csv'), 'utf8').trim().split('\n');
    expect(regrant[0]).toBe(REGRANT_COLUMNS.join(','));
    const expected: string[] = [];
    for (const id of [...first, ...second]) {
      const [t, ...more] = h.sim.transfersOf(id);
      expect(more).toHaveLength(0);
      for (const a of t?.data.authorizations.revoked ?? []) {
        const key = BY_ID.get(before.get(id) ?? 0) ?? '';
        expect(a.name).not.toMatch(/[",\n]/);
        expected.push(
          [
            id,
            a.userId,
            a.email,
            a.name,
            a.role,
            a.authorizedAt,
            a.authorizedById,
            key,
            before.get(id),
            'acme',
            t?.data.transferDetails.transferId,
          ].join(','),
        );
      }
    }
    expect(expected.length).toBeGreaterThan(5);
    // Some of them come from the archive only.
    expect(first.some((id) => (h.sim.transfersOf(id)[0]?.data.authorizations.revoked.length ?? 0) > 0)).toBe(
      true,
    );
    expect(regrant.slice(1).sort()).toEqual(expected.sort());

    // 4. Enqueued with beta's and gamma's tokens (--move: the learners are acme's, done there), worked:
    // every learner is back where it was, and nothing else moved.
    for (const key of ['beta', 'gamma']) {
      const e = await runCommand(['enqueue', '--csv', join(dir, `move-back-${key}.csv`), '--move'], h.env);
      expect(e.code, e.stderr).toBe(0);
      expect(e.stdout).toMatch(/moved +\d+ from another organization/);
    }
    await h.workUntilIdle({ orgs: ['beta', 'gamma'] });
    for (const id of [...first, ...second]) {
      expect(h.sim.learner(id)?.organizationId, `learner ${id}`).toBe(before.get(id));
      expect(h.sim.transfersOf(id)).toHaveLength(2);
    }
    for (const id of plain) expect(h.sim.learner(id)?.organizationId).toBe(ORG_ID.acme);
  });
});
