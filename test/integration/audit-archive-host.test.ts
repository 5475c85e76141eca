// The note of a dead exporter's write names its file, not only its path (docs/audit-archive.md, "Hosts
// and disks"): a host whose AUDIT_ARCHIVE_DIR is a disk of its own has a different file at the same path,
// holding entries already archived and trimmed from Redis, and never cuts it back for another host's
// write. Real Redis, real files; "another host's disk" is another directory mounted (renamed) at the path.
import { appendFileSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/core/log.ts';
import { createKeys } from '../../src/core/keys.ts';
import { AuditArchiver } from '../../src/ops/audit/archive.ts';
import {
  archiveLine,
  dayFile,
  gzipMember,
  prepareFile,
  sizeOf,
  type ArchivedEntry,
} from '../../src/ops/audit/archive-file.ts';
import { archiveDiskId } from '../../src/ops/audit/archive-note.ts';
import { AuditStream } from '../../src/outcomes/audit-stream.ts';
import { OutcomeStore } from '../../src/outcomes/store.ts';
import { deletePrefix, newRedis, randomPrefix } from '../helpers/redis.ts';

const redis = newRedis();
const prefix = randomPrefix('archhost');
const keys = createKeys(prefix);
const store = new OutcomeStore(redis, keys);
const stream = new AuditStream(redis, keys);
const root = mkdtempSync(join(tmpdir(), 'lt-archive-host-'));
let n = 0;

afterAll(async () => {
  await deletePrefix(redis, prefix);
  await redis.quit();
  rmSync(root, { recursive: true, force: true });
});

/** A transfer's audit entry as the worker writes it (and the finished learner's story after it). */
async function transfer(org: string, id: number): Promise<string> {
  const t = `T${++n}`;
  const r = await store.finish({
    org,
    learnerId: id,
    runId: 'run-h',
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

/** The transfers' ids in a day file read whole (gunzip fails on a torn member followed by another). */
function archived(dir: string, org: string): string[] {
  return gunzipSync(readFileSync(dayFile(dir, org, today())))
    .toString('utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as ArchivedEntry)
    .filter((l) => l.fields.kind !== 'record')
    .map((l) => l.auditId);
}

const streamIds = async (org: string) =>
  (await redis.xrange(keys.audit(org), '-', '+'))
    .filter(([, f]) => !f.some((v, i) => i % 2 === 0 && v === 'kind' && f[i + 1] === 'record'))
    .map(([id]) => id);

/** An archiver whose warnings are kept. */
function archiver(dir: string): { a: AuditArchiver; warnings: () => { msg: string; file?: string }[] } {
  const raw: string[] = [];
  const logger = createLogger({ level: 'warn', destination: { write: (l: string) => void raw.push(l) } });
  return {
    a: new AuditArchiver(redis, keys, { dir, logger }),
    warnings: () => raw.map((l) => JSON.parse(l) as { msg: string; file?: string }),
  };
}

/**
 * What a process killed in the middle of its write leaves: the note (this release's, naming the file's
 * disk and inode; or the previous release's: file, size, holder), and part of its gzip member.
 */
async function deadWrite(dir: string, org: string, format: 'current' | 'previous' = 'current') {
  const state = await stream.state(org);
  const entries = await stream.read(org, state.last, '+', 100);
  const file = dayFile(dir, org, today());
  const member = await gzipMember(entries.map((e) => archiveLine(org, e)).join(''));
  const { size, ino } = await prepareFile(file);
  if (format === 'current')
    await stream.begin(org, file, size, 'a-process-since-killed', {
      disk: await archiveDiskId(dir),
      ino,
      end: size + member.length,
    });
  else
    await redis.hset(keys.auditArchive(org), {
      file,
      size: String(size),
      holder: 'an-old-process-since-killed',
    });
  appendFileSync(file, member.subarray(0, member.length >> 1));
  return { file, size };
}

describe('the note of a dead write names its file, not only its path', () => {
  it('the same file: cut back to the noted size, the entries written once', async () => {
    const org = 'same1';
    const dir = join(root, 'same1');
    const first = await transfer(org, 1);
    await archiver(dir).a.runOnce([org]);
    const ids = [await transfer(org, 2), await transfer(org, 3)];
    const { file, size } = await deadWrite(dir, org);
    expect(await sizeOf(file)).toBeGreaterThan(size);
    const { a, warnings } = archiver(dir);
    expect(await a.runOnce([org])).toMatchObject({ archived: 4, failed: [] });
    expect(archived(dir, org)).toEqual([first, ...ids]);
    expect(warnings().map((w) => w.msg)).toEqual(['audit archive: undid an unfinished write']);
    expect((await stream.state(org)).pending).toBeUndefined();
    expect(await streamIds(org)).toEqual([]);
  });

  it("another host's disk at the same path: its file is not cut, the entries are archived again there, and the dead host cuts its own file back later", async () => {
    const org = 'host2';
    const mount = join(root, 'host2');
    const [diskA, diskB] = [join(root, 'host2-a'), join(root, 'host2-b')];
    // Host B archives five transfers onto its disk (trimmed from Redis: on that disk only).
    const onB = [];
    for (let i = 1; i <= 5; i++) onB.push(await transfer(org, i));
    await archiver(mount).a.runOnce([org]);
    expect(await streamIds(org)).toEqual([]);
    renameSync(mount, diskB);
    // Host A archives one onto its disk, then dies in the middle of its next write.
    const onA = [await transfer(org, 6)];
    await archiver(mount).a.runOnce([org]);
    const again = [await transfer(org, 7), await transfer(org, 8)];
    const note = await deadWrite(mount, org);
    renameSync(mount, diskA);
    // Host B takes the lease, its own disk at the path: a larger, different file.
    renameSync(diskB, mount);
    const bBefore = readFileSync(note.file);
    expect(bBefore.length).toBeGreaterThan(note.size);
    const { a, warnings } = archiver(mount);
    expect(await a.runOnce([org])).toMatchObject({ archived: 4, failed: [] });
    const bAfter = readFileSync(note.file);
    expect(bAfter.subarray(0, bBefore.length).equals(bBefore)).toBe(true);
    expect(archived(mount, org)).toEqual([...onB, ...again]);
    expect(warnings()).toHaveLength(1);
    expect(warnings()[0]?.msg).toContain(`${note.file} on another disk`);
    expect(warnings()[0]?.file).toBe(note.file);
    const state = await stream.state(org);
    expect(state.pending).toBeUndefined();
    expect(Object.keys(state.parked ?? {})).toEqual([await archiveDiskId(diskA)]);
    expect(await streamIds(org)).toEqual([]);
    // Host A comes back: its next pass cuts its torn write away (its file reads whole again), and the
    // parked note goes.
    renameSync(mount, diskB);
    renameSync(diskA, mount);
    const later = await transfer(org, 9);
    const back = archiver(mount);
    expect(await back.a.runOnce([org])).toMatchObject({ archived: 2, failed: [] });
    expect(archived(mount, org)).toEqual([...onA, later]);
    expect(back.warnings().map((w) => w.msg)).toEqual([
      'audit archive: undid an unfinished write of this disk',
    ]);
    expect((await stream.state(org)).parked).toBeUndefined();
    // Nothing lost: every transfer is on one disk or the other.
    renameSync(mount, diskA);
    renameSync(diskB, mount);
    expect(archived(mount, org)).toEqual([...onB, ...again]);
  });

  it('a note for a new file (size 0), the file replaced since: not wiped', async () => {
    const org = 'new3';
    const dir = join(root, 'new3');
    const elsewhere = join(root, 'new3-other');
    // The file that replaces it: entries archived (and trimmed) into a file of its own.
    const kept = [await transfer(org, 1), await transfer(org, 2)];
    await archiver(elsewhere).a.runOnce([org]);
    const ids = [await transfer(org, 3)];
    const note = await deadWrite(dir, org);
    expect(note.size).toBe(0);
    const ino = statSync(note.file).ino;
    rmSync(note.file);
    renameSync(dayFile(elsewhere, org, today()), note.file);
    expect(statSync(note.file).ino).not.toBe(ino);
    const before = readFileSync(note.file);
    const { a, warnings } = archiver(dir);
    expect(await a.runOnce([org])).toMatchObject({ archived: 2, failed: [] });
    expect(readFileSync(note.file).subarray(0, before.length).equals(before)).toBe(true);
    expect(archived(dir, org)).toEqual([...kept, ...ids]);
    expect(warnings().map((w) => w.msg)).toEqual([
      `audit archive: the note of an unfinished write is not for ${note.file} as it is (another file is at that path now): left as is, the entries are archived again`,
    ]);
    expect((await stream.state(org)).pending).toBeUndefined();
  });

  it("the previous release's note (path and size only): cut back when the file ends with exactly that write, never another host's file", async () => {
    const org = 'old4';
    const mount = join(root, 'old4');
    const diskB = join(root, 'old4-b');
    // Its own file: cut back as before.
    const first = await transfer(org, 1);
    await archiver(mount).a.runOnce([org]);
    const ids = [await transfer(org, 2)];
    const own = await deadWrite(mount, org, 'previous');
    const state = await stream.state(org);
    expect(state.pending).toEqual({ file: own.file, size: own.size });
    const { a, warnings } = archiver(mount);
    expect(await a.runOnce([org])).toMatchObject({ archived: 2, failed: [] });
    expect(archived(mount, org)).toEqual([first, ...ids]);
    expect(warnings().map((w) => w.msg)).toEqual(['audit archive: undid an unfinished write']);
    // Another host's file at the path, for a note of size 0 (the dead host's file was new) and one
    // inside the file: both left whole.
    renameSync(mount, diskB);
    const onB = [first, ...ids];
    for (const size of [0, 100]) {
      const more = await transfer(org, 10 + size);
      await redis.hset(keys.auditArchive(org), {
        file: own.file,
        size: String(size),
        holder: 'an-old-process-since-killed',
      });
      renameSync(diskB, mount);
      const before = readFileSync(own.file);
      const b = archiver(mount);
      expect(await b.a.runOnce([org])).toMatchObject({ archived: 2, failed: [] });
      expect(readFileSync(own.file).subarray(0, before.length).equals(before)).toBe(true);
      onB.push(more);
      expect(archived(mount, org)).toEqual(onB);
      expect(b.warnings()).toHaveLength(1);
      expect(b.warnings()[0]?.msg).toContain('the file does not end with that write');
      renameSync(mount, diskB);
    }
    // A newer note's identity left beside an old process's note (a fleet being upgraded): not its.
    await redis.hset(keys.auditArchive(org), {
      file: own.file,
      size: '0',
      holder: 'old',
      identity: JSON.stringify({ holder: 'new', disk: 'd', ino: '1', end: 9 }),
    });
    expect((await stream.state(org)).pending).toEqual({ file: own.file, size: 0 });
  });
});
