// `audit forget` (issue 47): an address spread over Redis, three archive day files (both entry formats:
// `raw` and the previous release's `result`, and a cut answer's kept prefix), a spool file of a dead
// process and a kept body. A dry run changes nothing; then the address, the name and the user id are
// nowhere (Redis, archive, spool, kept bodies), every other person's entry is unchanged line for line
// once decompressed, every entry still counts its revoked authorizations, and the change log says who
// asked without the address. Real Redis, the real CLI in-process, real files.
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readChanges } from '../../src/limiter/control-log.ts';
import { AuditArchiver } from '../../src/ops/audit/archive.ts';
import { hostTag } from '../../src/worker/spool.ts';
import { runCommand } from '../helpers/cli.ts';
import { startHarness, type Harness } from '../helpers/pipeline.ts';
import { dumpPrefix } from '../helpers/redis.ts';

const EMAIL = 'Tess.Target@Example.org';
const ASKED = 'tess.target@example.org';
const NAME = 'Tess Target';
const USER = 424242;
const target = {
  userId: USER,
  email: EMAIL,
  name: NAME,
  role: 'teacher',
  authorizedAt: '2026-01-01T00:00:00.000000Z',
  authorizedById: 1001,
};
const other = (n: number) => ({
  userId: 500_000 + n,
  email: `other.${n}@example.org`,
  name: `Other Person ${n}`,
  role: 'parent',
  authorizedAt: '2026-02-01T00:00:00.000000Z',
  authorizedById: 1002,
});

function data(learnerId: number, revoked: unknown[]) {
  return {
    learnerId,
    newOwner: 'Acme',
    transferDetails: {
      transferId: `t-${learnerId}`,
      initiatedAt: '2026-10-01T00:00:00.000000Z',
      status: 'completed',
      assessmentIds: [],
    },
    learnerGroups: {
      removed: [{ id: 1, name: 'Old', description: '' }],
      added: [{ id: 2, name: 'New', description: '' }],
    },
    authorizations: { revoked },
  };
}
const body = (learnerId: number, revoked: unknown[]) =>
  JSON.stringify({ success: true, message: 'Learner transferred', data: data(learnerId, revoked) });

const day = (d: string) => Date.parse(`${d}T10:00:00Z`);
const DAYS = ['2026-10-01', '2026-10-02', '2026-10-05'];

let h: Harness;
let archive: string;
let spoolDir: string;
let env: Record<string, string>;
let before: Map<string, string[]>;
const tmp = mkdtempSync(join(tmpdir(), 'lt-forget-'));

const mentions = (text: string) =>
  text.toLowerCase().includes(ASKED) || text.includes(NAME) || text.includes(String(USER));

function dayLines(file: string): string[] {
  return gunzipSync(readFileSync(file)).toString('utf8').split('\n').filter(Boolean);
}

function archiveFiles(): string[] {
  return readdirSync(join(archive, 'acme'))
    .filter((n) => n.endsWith('.ndjson.gz'))
    .map((n) => join(archive, 'acme', n))
    .sort();
}

async function xadd(id: string, fields: Record<string, string>): Promise<void> {
  await h.ctx.redis.xadd(h.ctx.keys.audit('acme'), id, ...Object.entries(fields).flat());
}

beforeAll(async () => {
  archive = join(tmp, 'archive');
  h = await startHarness({ tag: 'forget', env: { AUDIT_ARCHIVE_DIR: archive } });
  env = h.env;
  spoolDir = h.config.spoolDir;
  const base = { runId: 'r1', transferId: '' };
  // Three days of entries, the person in each: raw bodies, the previous release's `result`, a cut prefix.
  let learner = 100;
  for (const [i, d] of DAYS.entries()) {
    const t = day(d);
    await xadd(`${t}-0`, {
      ...base,
      learnerId: String(learner),
      kind: 'transfer',
      raw: body(learner++, [other(i), target]),
    });
    await xadd(`${t}-1`, {
      ...base,
      learnerId: String(learner),
      kind: 'transfer',
      raw: body(learner++, [other(10 + i)]),
    });
    await xadd(`${t}-2`, {
      ...base,
      learnerId: String(learner),
      result: JSON.stringify(data(learner++, [target, other(20 + i)])),
    });
    await xadd(`${t}-3`, {
      ...base,
      learnerId: String(learner),
      result: JSON.stringify(data(learner++, [other(30 + i)])),
    });
  }
  const whole = body(999, [target]);
  const cut = whole.slice(0, whole.indexOf(EMAIL) + EMAIL.length + 12);
  await xadd(`${day(DAYS[2] as string) + 5}-0`, {
    ...base,
    learnerId: '999',
    kind: 'unreadable',
    raw: cut,
    reason: 'Unterminated string in JSON',
    bodyBytes: '20000',
    bodySha256: createHash('sha256').update(cut).digest('hex'),
  });
  const archiver = new AuditArchiver(h.ctx.redis, h.ctx.keys, { dir: archive });
  expect((await archiver.runOnce(['acme'])).archived).toBe(13);
  // And in Redis, not archived yet (today).
  await xadd('*', { ...base, learnerId: '200', kind: 'transfer', raw: body(200, [target, other(40)]) });
  await xadd('*', { ...base, learnerId: '201', kind: 'transfer', raw: body(201, [other(41)]) });
  // The spool of a process that is gone, and a kept body (an answer over 8 KiB that could not be parsed).
  mkdirSync(join(spoolDir, 'bodies'), { recursive: true });
  const spoolLine = (id: string, raw: string) =>
    JSON.stringify({
      id,
      args: { org: 'acme', learnerId: 300, audit: { key: `a:${id}`, transferId: '', raw, kind: 'transfer' } },
    });
  writeFileSync(
    join(spoolDir, `${h.prefix}.${hostTag()}.999999.${Date.now()}.abcdef.spool`),
    `${spoolLine('x1', body(300, [target]))}\n${spoolLine('x2', body(301, [other(50)]))}\n`,
  );
  writeFileSync(
    join(spoolDir, 'bodies', `${'a'.repeat(64)}.body`),
    `<html>${body(302, [target])}`.repeat(300),
  );
  writeFileSync(
    join(spoolDir, 'bodies', `${'b'.repeat(64)}.body`),
    `<html>${body(303, [other(60)])}`.repeat(300),
  );
  before = new Map(archiveFiles().map((f) => [f, dayLines(f)]));
});
afterAll(async () => {
  await h?.close();
  rmSync(tmp, { recursive: true, force: true });
});

/** Every text the tool keeps: Redis under the prefix, the archive decompressed, the spool and the bodies. */
async function everything(): Promise<string[]> {
  const texts = await dumpPrefix(h.ctx.redis, h.prefix);
  for (const f of archiveFiles()) texts.push(...dayLines(f));
  for (const n of readdirSync(spoolDir))
    if (n.includes('.spool')) texts.push(readFileSync(join(spoolDir, n), 'utf8'));
  for (const n of readdirSync(join(spoolDir, 'bodies')))
    texts.push(readFileSync(join(spoolDir, 'bodies', n), 'utf8'));
  return texts;
}

const revokedCount = (line: string): number | undefined => {
  const e = JSON.parse(line) as { fields: { raw?: string; result?: string; kind?: string } };
  if (e.fields.kind === 'unreadable') return undefined;
  const d = e.fields.raw
    ? (JSON.parse(e.fields.raw) as { data: { authorizations: { revoked: unknown[] } } }).data
    : (JSON.parse(e.fields.result ?? '{}') as { authorizations: { revoked: unknown[] } });
  return d.authorizations.revoked.length;
};

describe('audit forget --email', () => {
  it('the person is in Redis, three day files, the spool and a kept body to begin with', async () => {
    expect(archiveFiles()).toHaveLength(3);
    for (const lines of before.values()) expect(lines.some(mentions)).toBe(true);
    const all = await everything();
    expect(all.filter(mentions).length).toBeGreaterThanOrEqual(5);
  });

  it('--dry-run says what it would change and changes nothing', async () => {
    const r = await runCommand(['audit', 'forget', '--email', ASKED, '--dry-run'], env);
    expect(r.stderr).not.toMatch(/error/i);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(
      'would change 10 entries: 1 in Redis (archived first, then rewritten in the archive), 7 in 3 archive files, 1 in 1 spool file, 1 kept body deleted',
    );
    expect(r.stdout.toLowerCase()).not.toContain(ASKED);
    for (const [f, lines] of before) expect(dayLines(f)).toEqual(lines);
    expect((await everything()).filter(mentions).length).toBeGreaterThanOrEqual(5);
  });

  it('erases the address, the name and the user id everywhere, and leaves every other entry as it was', async () => {
    const r = await runCommand(['audit', 'forget', '--email', ASKED], env);
    expect(r.code, r.stderr).toBe(0);
    // 8 archive entries (7 + the one archived from Redis) in 4 files, 1 spool entry, 1 body.
    expect(r.stdout).toContain(
      'changed 10 entries: 8 in 4 archive files, 1 in 1 spool file, 1 kept body deleted',
    );
    expect((await everything()).filter(mentions)).toEqual([]);
    // Line for line: every other person's entry unchanged; the person's lines keep every authorization.
    for (const [f, lines] of before) {
      const after = dayLines(f);
      expect(after).toHaveLength(lines.length);
      lines.forEach((line, i) => {
        const now = after[i] as string;
        if (!mentions(line)) expect(now).toBe(line);
        else {
          expect(now).not.toBe(line);
          expect(revokedCount(now)).toBe(revokedCount(line));
          expect(JSON.parse(now)).toMatchObject({
            fields: { personalRemoved: expect.stringContaining('erasure request') },
          });
        }
      });
    }
    // Others' e-mail addresses are still there.
    const all = (await everything()).join('\n');
    for (const n of [0, 1, 2, 10, 20, 40, 50]) expect(all).toContain(`other.${n}@example.org`);
    expect(readdirSync(join(spoolDir, 'bodies'))).toEqual([`${'b'.repeat(64)}.body`]);
  });

  it('is in the change log with its author, never with the address', async () => {
    const changes = await readChanges(h.ctx.redis, h.ctx.keys, { action: 'audit.forget' });
    expect(changes).toHaveLength(1);
    expect(changes[0]?.who).toMatch(/^cli:/);
    expect(changes[0]?.details).toMatchObject({
      person: 'an e-mail address',
      archiveEntries: 8,
      spoolEntries: 1,
      bodies: 1,
    });
    expect(JSON.stringify(changes).toLowerCase()).not.toContain(ASKED);
  });

  it('refuses without an archive, and without a person, saying why', async () => {
    const { AUDIT_ARCHIVE_DIR: _, ...noArchive } = env;
    const r = await runCommand(['audit', 'forget', '--email', ASKED], noArchive);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('audit forget needs AUDIT_ARCHIVE_DIR');
    const none = await runCommand(['audit', 'forget'], env);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('--email ADDRESS or --user-id N');
  });
});
