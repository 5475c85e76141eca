// The audit archive (docs/audit-archive.md): the stream goes to fsynced day files and only then is trimmed;
// nothing is trimmed that is not on disk, nothing is written twice (two archivers at once, a crash between
// the file and the cursor), and `audit` still answers from the files what the stream no longer holds.
import {
  appendFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { createKeys } from '../../src/core/keys.ts';
import { AUDIT_SCRIPTS, AuditArchiver } from '../../src/ops/audit/archive.ts';
import {
  appendMember,
  archiveLine,
  dayFile,
  sizeOf,
  type ArchivedEntry,
} from '../../src/ops/audit/archive-file.ts';
import { exportAndTrim } from '../../src/ops/audit/export.ts';
import { auditEntriesById, searchAudit, type AuditFilter } from '../../src/ops/audit/search.ts';
import { AuditStream, nextId } from '../../src/outcomes/audit-stream.ts';
import { OutcomeStore } from '../../src/outcomes/store.ts';
import { runCommand } from '../helpers/cli.ts';
import { deletePrefix, newRedis, REDIS_URL, randomPrefix } from '../helpers/redis.ts';

const redis = newRedis();
const prefix = randomPrefix('archive');
const keys = createKeys(prefix);
const store = new OutcomeStore(redis, keys);
const stream = new AuditStream(redis, keys);
const root = mkdtempSync(join(tmpdir(), 'lt-archive-'));
let n = 0;

afterAll(async () => {
  await deletePrefix(redis, prefix);
  await redis.quit();
  rmSync(root, { recursive: true, force: true });
});

/**
 * A transfer's audit entry as the worker writes it (finish-attempt.lua), for learner `id`; the script also
 * appends the finished learner's story (an entry of kind 'record', docs/redis-memory.md) after it. The
 * id lists below leave the stories out (`notStory`), the pass counts count both.
 */
async function transfer(org: string, id: number, runId = 'run-a'): Promise<string> {
  const t = `T${++n}`;
  const r = await store.finish({
    org,
    learnerId: id,
    runId,
    at: Date.now(),
    attemptId: `a-${n}`,
    update: { b: 'transferred', c: 'transferred', s: 200, x: t, d: 5, n: 1, ok: 1 },
    audit: {
      key: `t:${t}`,
      transferId: t,
      raw: JSON.stringify({ success: true, data: { learnerId: id, transferId: t } }),
      kind: 'transfer',
    },
  });
  return r.auditId ?? '';
}

const today = () => new Date().toISOString().slice(0, 10);

/** Every line of an organization's archive, in file order. */
function archived(dir: string, org: string, day = today()): ArchivedEntry[] {
  const text = gunzipSync(readFileSync(dayFile(dir, org, day))).toString('utf8');
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as ArchivedEntry)
    .filter((l) => l.fields.kind !== 'record');
}

/** Every archived line, the stories included. */
function archivedAll(dir: string, org: string, day = today()): ArchivedEntry[] {
  const text = gunzipSync(readFileSync(dayFile(dir, org, day))).toString('utf8');
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as ArchivedEntry);
}

/** Each test starts with no organization marked (the tests before it leave theirs). */
const unmarkAll = () => redis.del(keys.auditUnarchived());

const notStory = (fields: string[]) =>
  !fields.some((v, i) => i % 2 === 0 && v === 'kind' && fields[i + 1] === 'record');
const streamIds = async (org: string) =>
  (await redis.xrange(keys.audit(org), '-', '+')).filter(([, f]) => notStory(f)).map(([id]) => id);

async function collect(filter: AuditFilter, archiveDir?: string): Promise<string[]> {
  const out: string[] = [];
  for await (const f of searchAudit({ stream, archiveDir }, filter))
    if (f.entry.kind !== 'record') out.push(f.entry.id);
  return out;
}

describe('audit --out FILE --trim', () => {
  it('trims exactly what the file holds: an entry written during the export stays in the stream', async () => {
    const org = 'trim1';
    const before = [await transfer(org, 1), await transfer(org, 2), await transfer(org, 3)];
    const out = join(root, 'trim', 'audit.ndjson');
    const [result, during] = await Promise.all([exportAndTrim({ stream }, [org], out), transfer(org, 4)]);
    const lines = readFileSync(out, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { auditId: string; kind: string });
    const inFile = lines.filter((l) => l.kind !== 'record').map((l) => l.auditId);
    const left = await streamIds(org);
    // Every entry is in exactly one place, and the three written before the export are in the file.
    expect(inFile.slice(0, 3)).toEqual(before);
    expect([...inFile, ...left].sort()).toEqual([...before, during].sort());
    expect(inFile.filter((id) => left.includes(id))).toEqual([]);
    expect(result.trimmed).toBe(lines.length);
  });

  it('a file that cannot be written trims nothing', async () => {
    const org = 'trim2';
    await transfer(org, 1);
    const blocker = join(root, 'not-a-dir');
    writeFileSync(blocker, 'x');
    await expect(exportAndTrim({ stream }, [org], join(blocker, 'audit.ndjson'))).rejects.toThrow();
    expect(await streamIds(org)).toHaveLength(1);
  });

  it('refuses --trim with a filter, naming the flag, before anything is written', async () => {
    const env = { REDIS_URL, QUEUE_PREFIX: prefix, LEARNER_API_TOKENS: 'trim3:tok-abcdefgh12345678' };
    const out = join(root, 'cli', 'audit.ndjson');
    const r = await runCommand(['audit', '--out', out, '--trim', '--learner', '3'], env);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--trim cannot take --learner');
    const bad = await runCommand(['audit', '--since', '26/11/2026'], env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--since expects a UTC day like 2026-11-26');
    const typo = await runCommand(['audit', '--archive', join(root, 'no-such-dir')], env);
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain('no-such-dir: no such directory');
  });
});

describe('the archiver of work (AUDIT_ARCHIVE_DIR)', () => {
  it('archives every field of every entry, then trims: the stream keeps only later entries', async () => {
    const org = 'arc1';
    await unmarkAll();
    const dir = join(root, 'arc1');
    const ids = [
      await transfer(org, 1),
      await transfer(org, 2),
      await store.appendClaimMove(org, 3, 'run-a', 'x', 'me'),
    ];
    const pass = await new AuditArchiver(redis, keys, { dir }).runOnce();
    // Two transfers with their two stories, and the claim move.
    expect(pass).toMatchObject({ ran: true, archived: 5, trimmed: 5, failed: [] });
    expect(archivedAll(dir, org).map((l) => l.fields.kind)).toEqual([
      'transfer',
      'record',
      'transfer',
      'record',
      'claim-move',
    ]);
    const lines = archived(dir, org);
    expect(lines.map((l) => l.auditId)).toEqual(ids);
    // Private: names and e-mails.
    expect(statSync(dayFile(dir, org, today())).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, org)).mode & 0o077).toBe(0);
    expect(lines[2]?.fields).toMatchObject({ kind: 'claim-move', learnerId: '3', runId: 'run-a' });
    expect(await streamIds(org)).toEqual([]);
    expect((await stream.state(org)).last).toBe(ids[2]);
    const later = await transfer(org, 4);
    expect(await streamIds(org)).toEqual([later]);
    // Idle (nothing marked): a pass reads one set and takes no lease.
    await new AuditArchiver(redis, keys, { dir }).runOnce();
    expect(archived(dir, org).map((l) => l.auditId)).toEqual([...ids, later]);
    expect(await new AuditArchiver(redis, keys, { dir }).runOnce()).toMatchObject({ ran: false });
  });

  it('a learner that ends with no answer to audit (403) still marks its organization: its story is in the stream', async () => {
    const org = 'arc6';
    await unmarkAll();
    await store.finish({
      org,
      learnerId: 9,
      runId: 'run-a',
      at: Date.now(),
      attemptId: `a-${++n}`,
      update: { b: 'forbidden', c: 'forbidden', s: 403, d: 5, n: 1 },
    });
    expect((await redis.xrange(keys.audit(org), '-', '+')).map(([, f]) => f[f.indexOf('kind') + 1])).toEqual([
      'record',
    ]);
    expect(await redis.sismember(keys.auditUnarchived(), org)).toBe(1);
  });

  it('a write that fails trims nothing, and the organization is tried again next pass', async () => {
    const org = 'arc2';
    await unmarkAll();
    const dir = join(root, 'arc2');
    await transfer(org, 1);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, org), 'in the way');
    const pass = await new AuditArchiver(redis, keys, { dir }).runOnce();
    expect(pass.failed).toEqual([org]);
    expect(await streamIds(org)).toHaveLength(1);
    expect(await stream.state(org)).toEqual({ last: '' });
    expect(await redis.sismember(keys.auditUnarchived(), org)).toBe(1);
    rmSync(join(dir, org));
    expect(await new AuditArchiver(redis, keys, { dir }).runOnce()).toMatchObject({ archived: 2 });
  });

  it('two archivers at once write each entry exactly once', async () => {
    const org = 'arc3';
    await unmarkAll();
    const dir = join(root, 'arc3');
    const a = new AuditArchiver(redis, keys, { dir, batch: 3 });
    const b = new AuditArchiver(redis, keys, { dir, batch: 3 });
    const written: string[] = [];
    for (let round = 0; round < 4; round++) {
      // Entries waiting for both, and more written while they run.
      for (const i of [1, 2, 3]) written.push(await transfer(org, round * 10 + i));
      const during = Promise.all([4, 5].map((i) => transfer(org, round * 10 + i)));
      const [ids] = await Promise.all([during, a.runOnce([org]), b.runOnce([org])]);
      written.push(...ids);
    }
    await a.runOnce([org]);
    const ids = archived(dir, org).map((l) => l.auditId);
    expect(ids).toHaveLength(20);
    expect(new Set(ids).size).toBe(20);
    expect([...ids].sort()).toEqual([...written].sort());
    expect(await streamIds(org)).toEqual([]);
  });

  it('a crash between the file and the cursor writes nothing twice (and a torn write is cut back)', async () => {
    const org = 'arc4';
    await unmarkAll();
    const dir = join(root, 'arc4');
    const first = await transfer(org, 1);
    await new AuditArchiver(redis, keys, { dir }).runOnce();
    const ids = [await transfer(org, 2), await transfer(org, 3)];
    // What a process killed after its fsync and before its cursor leaves: the note, the appended member.
    const file = dayFile(dir, org, new Date().toISOString().slice(0, 10));
    const entries = await stream.read(org, first, '+', 10);
    await stream.begin(org, file, await sizeOf(file), 'a-process-since-killed');
    await appendMember(file, entries.map((e) => archiveLine(org, e)).join(''));
    // Meanwhile `audit` reads each entry once (the unconfirmed lines are read from the stream).
    expect(await collect({ orgs: [org] }, dir)).toEqual([first, ...ids]);
    await new AuditArchiver(redis, keys, { dir }).runOnce([org]);
    expect(archived(dir, org).map((l) => l.auditId)).toEqual([first, ...ids]);
    // A torn write (killed mid-write): garbage after the note's size, cut back by the next pass.
    const last = await transfer(org, 4);
    await stream.begin(org, file, await sizeOf(file), 'a-process-since-killed');
    appendFileSync(file, Buffer.from([0x1f, 0x8b, 0x08, 0x00, 0x42]));
    // Read meanwhile (the dashboard, `audit`): the file ends before the tear, the entry is in the stream.
    expect(await collect({ orgs: [org] }, dir)).toEqual([first, ...ids, last]);
    await new AuditArchiver(redis, keys, { dir }).runOnce();
    expect(archived(dir, org).map((l) => l.auditId)).toEqual([first, ...ids, last]);
    // A process that stalled past its lease and wakes to commit: refused, nothing moves.
    const committed = archivedAll(dir, org).at(-1)?.auditId;
    expect(committed).toBeDefined();
    expect((await stream.state(org)).last).toBe(committed);
    const commit = [keys.auditArchive(org), keys.audit(org)];
    expect(await AUDIT_SCRIPTS.run(redis, 'audit-commit', commit, ['stalled', first, nextId(first)])).toBe(
      -1,
    );
    expect((await stream.state(org)).last).toBe(committed);
    // And should its lines be in the file twice, `audit` reads each once.
    await appendMember(file, entries.map((e) => archiveLine(org, e)).join(''));
    expect(await collect({ orgs: [org] }, dir)).toEqual([first, ...ids, last]);
  });

  it('archives the stream as the previous release wrote it (entries with `result`, no cursor, no mark)', async () => {
    const org = 'arc5';
    await unmarkAll();
    const dir = join(root, 'arc5');
    const old = await redis.xadd(
      keys.audit(org),
      '*',
      'learnerId',
      '7',
      'runId',
      'old-run',
      'transferId',
      'T-old',
      'result',
      JSON.stringify({ learnerId: 7, authorizations: { revoked: [{ id: 1 }] } }),
    );
    // Nothing marked: only the sweep of a starting `work` finds it.
    expect(await new AuditArchiver(redis, keys, { dir }).runOnce()).toMatchObject({ ran: false });
    expect(await new AuditArchiver(redis, keys, { dir }).runOnce([org])).toMatchObject({ archived: 1 });
    expect(await streamIds(org)).toEqual([]);
    const all = [];
    for await (const f of searchAudit({ stream, archiveDir: dir }, { orgs: [org], learnerId: 7 }))
      all.push(f);
    const [found] = all;
    expect(found?.entry).toMatchObject({
      id: old,
      runId: 'old-run',
      result: { authorizations: { revoked: [{ id: 1 }] } },
    });
    expect(found?.file).toBe(dayFile(dir, org, new Date().toISOString().slice(0, 10)));
  });
});

describe('audit search over the archive and the stream', () => {
  it('finds archived entries by learner, run and date, each once, archive first', async () => {
    const org = 'srch';
    await unmarkAll();
    const dir = join(root, 'srch');
    const day = (d: number) => `${Date.UTC(2026, 10, d, 12)}-0`;
    const xadd = (id: string, learner: number, run: string) =>
      redis.xadd(
        keys.audit(org),
        id,
        'learnerId',
        String(learner),
        'runId',
        run,
        'transferId',
        '',
        'kind',
        'transfer',
        'at',
        '1',
        'raw',
        '{}',
      );
    await xadd(day(20), 1, 'run-x');
    await xadd(day(21), 2, 'run-y');
    await xadd(day(22), 1, 'run-y');
    await new AuditArchiver(redis, keys, { dir }).runOnce([org]);
    expect(await streamIds(org)).toEqual([]);
    const now = await transfer(org, 1, 'run-y');
    const orgs = [org];
    expect(await collect({ orgs, learnerId: 1 }, dir)).toEqual([day(20), day(22), now]);
    expect(await collect({ orgs, runId: 'run-y' }, dir)).toEqual([day(21), day(22), now]);
    const [since, until] = [Date.UTC(2026, 10, 21), Date.UTC(2026, 10, 22) - 1];
    expect(await collect({ orgs, sinceMs: since, untilMs: until }, dir)).toEqual([day(21)]);
    // Without the archive, only the stream answers.
    expect(await collect({ orgs, learnerId: 1 })).toEqual([now]);

    // Through the CLI, as an auditor runs it.
    const env = { REDIS_URL, QUEUE_PREFIX: prefix, LEARNER_API_TOKENS: `${org}:tok-abcdefgh12345678` };
    const r = await runCommand(
      ['audit', '--archive', dir, '--learner', '1', '--since', '2026-11-21', '--until', '2026-11-22'],
      env,
    );
    expect(r.code).toBe(0);
    const lines = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { auditId: string });
    expect(lines.map((l) => l.auditId)).toEqual([day(22)]);

    // A record's audit ids pointing to trimmed entries: read from the archive's day file, or said missing.
    const byId = await auditEntriesById(
      { stream, archiveDir: dir, read: (o, ids) => store.auditEntries(o, ids) },
      org,
      [day(21), now],
    );
    expect(byId.found.map((f) => [f.entry.id, f.file])).toEqual([
      [day(21), dayFile(dir, org, '2026-11-21')],
      [now, undefined],
    ]);
    const noArchive = await auditEntriesById({ stream, read: (o, ids) => store.auditEntries(o, ids) }, org, [
      day(21),
      now,
    ]);
    expect(noArchive.missing).toEqual([day(21)]);
  });
});
