// The way back (docs/undo.md): each learner's previous organization is kept where the tool read the list
// (plan --check --apply, crawl, reconcile) and through retries; `report --reverse DIR` writes what moving
// a run back takes, and the files it writes move every learner back on the simulator, with regrant.csv
// holding exactly the authorizations the simulator revoked (from the stream and the archive).
import {
  chmodSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuditArchiver } from '../../src/ops/audit/archive.ts';
import { appendMember, archiveLine, dayFile, dayOf } from '../../src/ops/audit/archive-file.ts';
import { applyPreflight } from '../../src/ops/intake/preflight-apply.ts';
import { runPreflight } from '../../src/ops/intake/preflight.ts';
import { runReconcile } from '../../src/ops/intake/reconcile.ts';
import { REGRANT_COLUMNS } from '../../src/ops/actions/reverse.ts';
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

    // --redact: the same rows, their e-mail address and name left empty (the personal columns).
    const redactedDir = join(h.dir, 'reverse-redacted');
    const red = await runCommand(['report', '--reverse', redactedDir, '--run', runId, '--redact'], h.env);
    expect(red.code, red.stderr).toBe(0);
    const redacted = csvRows(join(redactedDir, 'regrant.csv')).slice(1);
    const emailAt = REGRANT_COLUMNS.indexOf('email');
    const nameAt = REGRANT_COLUMNS.indexOf('name');
    expect(redacted).toHaveLength(expected.length);
    expect(redacted.every((r) => r[emailAt] === '' && r[nameAt] === '')).toBe(true);
    const unpersonal = (r: string[]) =>
      r.filter((_, i) => i !== emailAt && i !== nameAt && i !== 7).join(',');
    expect(redacted.map(unpersonal).sort()).toEqual(
      expected.map((line) => unpersonal(line.split(','))).sort(),
    );
    expect(readFileSync(join(redactedDir, 'regrant.csv'), 'utf8')).not.toMatch(/@/);

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

    // A second reverse of the same run moves nobody again: they are claimed by beta and gamma now.
    const again = join(h.dir, 'reverse-again');
    const rev2 = await runCommand(['report', '--reverse', again, '--run', runId], h.env);
    expect(rev2.code, rev2.stderr).toBe(0);
    expect(rev2.stdout).toMatch(/nothing to move back/);
    const claimed = csvRows(join(again, 'check-by-hand.csv')).slice(1);
    expect(claimed.map((r) => Number(r[1])).sort((a, b) => a - b)).toEqual(
      [...first, ...second].sort((a, b) => a - b),
    );
    expect(claimed.every((r) => /claimed by (beta|gamma) now/.test(r.join(',')))).toBe(true);
  });
});

describe('the previous organization: kept where the list is read, through retries; apart when unknown', () => {
  let g: Harness;
  beforeAll(async () => {
    g = await startHarness({
      tag: 'reverse-po',
      sim: { learners: 60, forbiddenLearnerIds: [5] },
      env: { LOG_LEVEL: 'warn', LEARNER_API_TOKENS: 'acme:sim-acme-1,beta:sim-beta-1' },
    });
  });
  afterAll(async () => {
    await g?.close();
  });
  const po = async (id: number) => (await g.ctx.store.get('acme', id))?.po;

  it('crawl, reconcile and plan --check --apply keep it; a waiting learner takes it; a retry keeps it', async () => {
    const crawl = await runCommand(
      ['crawl', '--org', 'acme', '--target-org-id', '1', '--from-org', '3', '--limit', '2', '--quiet'],
      g.env,
    );
    expect(crawl.code, crawl.stderr).toBe(0);
    expect([await po(3), await po(6)]).toEqual([3, 3]);

    const desired = g.writeFile('desired.csv', 'learnerId,org\n8,acme\n11,acme\n');
    await runReconcile(g.ctx, { file: desired, orgIds: { acme: 1, beta: 2 }, outDir: join(g.dir, 'rec') });
    expect([await po(8), await po(11)]).toEqual([2, 2]);

    // Enqueued from a plain CSV first (nothing read), then checked with --apply while it waits.
    await g.enqueueIds([14]);
    expect(await po(14)).toBeUndefined();
    const csv = g.writeFile('check.csv', 'learnerId\n14\n5\n');
    const applied = await runCommand(
      ['plan', '--check', '--csv', csv, '--org', 'acme', '--target-org-id', '1', '--apply', '--quiet'],
      g.env,
    );
    expect(applied.code, applied.stderr).toBe(0);
    expect(await g.ctx.store.get('acme', 14)).toMatchObject({ b: 'queued', po: 2 });

    await g.workUntilIdle();
    for (const [id, org] of [
      [3, 3],
      [6, 3],
      [8, 2],
      [11, 2],
      [14, 2],
    ] as const) {
      expect(await g.ctx.store.get('acme', id), `learner ${id}`).toMatchObject({ b: 'transferred', po: org });
    }
    // Learner 5 is refused: re-queued by retry (a re-opened record), refused again, compacted again.
    expect(await g.ctx.store.get('acme', 5)).toMatchObject({ b: 'forbidden', po: 2 });
    const retry = await runCommand(['retry', '--status', 'forbidden', '--learner', '5', '--yes'], g.env);
    expect(retry.code, retry.stderr).toBe(0);
    expect(await g.ctx.store.get('acme', 5)).toMatchObject({ b: 'queued', po: 2 });
    await g.workUntilIdle();
    expect(await g.ctx.store.get('acme', 5)).toMatchObject({ b: 'forbidden', po: 2, a: 2 });
  });

  it("lists a previous release's record as unknown, a possible repeat and an unreadable answer to check by hand, and reads the previous release's audit format from the archive", async () => {
    const runId = 'r-20261128-reverse01';
    await g.ctx.runs.create({ id: runId, kind: 'csv', source: 'old.csv', orgs: ['acme'] });
    // A record as the previous release (0781d00) wrote it: compacted, with no previous organization.
    const old = {
      b: 'transferred',
      r: runId,
      q: 1764000000000,
      t: 1764000000100,
      src: 'old.csv:2',
      s: 200,
      a: 1,
      x: 'trf_previous_release',
      k: 'acme#1',
      f: '1764000000100-0',
      ah: ['0123456789'],
    };
    await g.ctx.redis.hset(g.ctx.keys.outcomes('acme'), '20', JSON.stringify(old));
    expect(await g.ctx.store.get('acme', 20)).toMatchObject({ b: 'transferred', x: 'trf_previous_release' });

    // A possible repeat: no answer, then "already in the organization".
    const mark = (learnerId: number, previousOrgId: number) =>
      g.ctx.store.markQueued([
        { org: 'acme', learnerId, runId, source: 'x.csv:1', force: false, previousOrgId },
      ]);
    const at = Date.now();
    await mark(23, 2);
    await g.ctx.store.finish({
      org: 'acme',
      learnerId: 23,
      runId,
      at,
      attemptId: 'rev-23-1',
      update: { b: 'retrying', c: 'network-error', d: 5, n: 1 },
    });
    const repeat = await g.ctx.store.finish({
      org: 'acme',
      learnerId: 23,
      runId,
      at: at + 1,
      attemptId: 'rev-23-2',
      update: { b: 'already-in-org', c: 'already-in-org', s: 400, d: 5, n: 1 },
    });
    expect(repeat.possibleRepeat).toBe(true);
    // An unreadable answer after the attempts: the transfer may have happened.
    await mark(26, 2);
    await g.ctx.store.finish({
      org: 'acme',
      learnerId: 26,
      runId,
      at,
      attemptId: 'rev-26-1',
      update: { b: 'bad-response', c: 'bad-response', s: 200, d: 5, n: 1 },
      audit: {
        key: 'a:rev-26-1',
        transferId: '',
        raw: '{"success":tr',
        kind: 'unreadable',
        reason: 'cut body',
      },
    });

    // A transfer whose audit the previous release wrote (field `result`, no `raw`), archived since.
    await mark(29, 3);
    await g.ctx.store.finish({
      org: 'acme',
      learnerId: 29,
      runId,
      at,
      attemptId: 'rev-29-1',
      update: { b: 'transferred', c: 'transferred', s: 200, x: 'trf_old_format', d: 5, n: 1 },
    });
    const archive = join(g.dir, 'archive');
    const revoked = {
      userId: 4242,
      email: 'ada.berg7@example.test',
      name: 'Ada Berg',
      role: 'teacher',
      authorizedAt: '2025-03-04T05:06:07.123456Z',
      authorizedById: 1234,
    };
    const oldId = `${at - 3_600_000}-0`;
    await appendMember(
      dayFile(archive, 'acme', dayOf(oldId)),
      archiveLine('acme', {
        id: oldId,
        fields: {
          learnerId: '29',
          runId,
          transferId: 'trf_old_format',
          result: JSON.stringify({ learnerId: 29, authorizations: { revoked: [revoked] } }),
        },
      }),
    );

    const dir = join(g.dir, 'reverse');
    const rev = await runCommand(['report', '--reverse', dir, '--run', runId, '--archive', archive], g.env);
    expect(rev.code, rev.stderr).toBe(0);
    expect(readdirSync(dir).sort()).toEqual([
      'check-by-hand.csv',
      'move-back-org-3.csv',
      'regrant.csv',
      'unknown.csv',
    ]);
    // gamma has no token here: its file names the organization by its id.
    expect(rev.stdout).toMatch(/no key here has a token of organization 3/);
    expect(csvRows(join(dir, 'move-back-org-3.csv'))).toEqual([
      ['learnerId', 'org'],
      ['29', '3'],
    ]);
    expect(csvRows(join(dir, 'regrant.csv')).slice(1)).toEqual([
      [
        '29',
        '4242',
        revoked.email,
        revoked.name,
        'teacher',
        revoked.authorizedAt,
        '1234',
        '3',
        '3',
        'acme',
        'trf_old_format',
      ],
    ]);
    const unknown = csvRows(join(dir, 'unknown.csv'));
    expect(unknown.slice(1).map((r) => r.slice(0, 5))).toEqual([
      ['acme', '20', runId, 'transferred', 'trf_previous_release'],
    ]);
    expect(unknown[1]?.join(',')).toMatch(/previous organization not recorded/);
    const check = csvRows(join(dir, 'check-by-hand.csv')).slice(1);
    check.sort((a, b) => Number(a[1]) - Number(b[1]));
    expect(check.map((r) => r.slice(0, 5))).toEqual([
      ['acme', '23', runId, 'already-in-org', '2'],
      ['acme', '26', runId, 'bad-response', '2'],
    ]);
    expect(check[0]?.join(',')).toMatch(/possible repeat: .*got no answer/);
    expect(check[1]?.join(',')).toMatch(/unreadable answer \(cut body\): the transfer may have happened/);
    for (const f of readdirSync(dir)) expect(mode(join(dir, f)), f).toBe(0o600);
  });

  it('refuses a link planted at one of its files before it writes any (exit 2, the path named)', async () => {
    const dir = join(g.dir, 'planted');
    mkdirSync(dir);
    const victim = join(g.dir, 'someone-elses.csv');
    writeFileSync(victim, 'theirs\n', { mode: 0o644 });
    chmodSync(victim, 0o644);
    symlinkSync(victim, join(dir, 'regrant.csv'));
    const r = await runCommand(['report', '--reverse', dir, '--org', 'acme'], g.env);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${join(dir, 'regrant.csv')} is a symbolic link`);
    expect(readFileSync(victim, 'utf8')).toBe('theirs\n');
    expect(mode(victim)).toBe(0o644);
    expect(readdirSync(dir)).toEqual(['regrant.csv']);
  });

  it('refuses --reverse without a run or organization, and with the flags of a plain report', async () => {
    const none = await runCommand(['report', '--reverse', join(g.dir, 'x')], g.env);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/--reverse DIR needs --run ID or --org KEY/);
    const split = await runCommand(
      ['report', '--reverse', join(g.dir, 'x'), '--org', 'acme', '--split', 'y'],
      g.env,
    );
    expect(split.code).toBe(2);
    expect(split.stderr).toMatch(/--reverse cannot take --split/);
    const alone = await runCommand(['report', '--org-id', 'beta=2'], g.env);
    expect(alone.code).toBe(2);
    expect(alone.stderr).toMatch(/--org-id go with --reverse DIR only/);
  });
});
