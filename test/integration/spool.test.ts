// The write-ahead spool (worker/spool.ts) on a real disk, and its replay (Recorder.replay) into a real
// Redis: entries leave the file only when done, the file and its directory are private, a live process's
// file is never taken, a dead one's is, once, and a replay writes each response once however often it
// runs.
import { execFileSync } from 'node:child_process';
import {
  appendFileSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createKeys } from '../../src/core/keys.ts';
import { createLogger } from '../../src/core/log.ts';
import { OutcomeStore, type FinishArgs } from '../../src/outcomes/store.ts';
import { shortAttemptId } from '../../src/outcomes/record.ts';
import { Recorder } from '../../src/worker/recorder.ts';
import {
  abandonedSpools,
  alive,
  hostTag,
  readSpool,
  Spool,
  SPOOL_STALE_MS,
  takeSpool,
} from '../../src/worker/spool.ts';
import { deletePrefix, newRedis, randomPrefix } from '../helpers/redis.ts';

const redis = newRedis();
const prefix = randomPrefix('spool');
const keys = createKeys(prefix);
const store = new OutcomeStore(redis, keys);
const root = mkdtempSync(join(tmpdir(), 'lt-spool-'));
let dirs = 0;
/** A directory that does not exist yet (Spool.open creates it). */
const newDir = () => join(root, `d${++dirs}`, 'spool');

afterAll(async () => {
  rmSync(root, { recursive: true, force: true });
  await deletePrefix(redis, prefix);
  await redis.quit();
});

/** A pid that ran on this host and is gone now (a child that exited), so no process has it. */
function deadPid(): number {
  for (;;) {
    const pid = Number(execFileSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']));
    if (!alive(pid)) return pid;
  }
}

/** A spool file name as spool.ts makes it: `<prefix>.<host>.<pid>.<start>.<rand>.spool`. */
const spoolName = (p: string, pid: number, host = hostTag()) =>
  `${p}.${host}.${pid}.${Date.now()}.a1b2c3.spool`;

let seq = 0;
function finishArgs(learnerId: number, x: string): FinishArgs {
  seq++;
  return {
    org: 'acme',
    learnerId,
    runId: 'run-spool',
    at: 1_700_000_000_000 + seq,
    attemptId: `spool-att-${seq}`,
    update: { b: 'transferred', c: 'transferred', s: 200, x, d: 10, n: 1, ok: 1 },
    audit: {
      key: `t:${x}`,
      transferId: x,
      raw: JSON.stringify({ data: { id: x, extra: 'é' } }),
      kind: 'transfer',
    },
  };
}

const entryLine = (id: string, args: FinishArgs) => `${JSON.stringify({ id, args })}\n`;

describe('Spool', () => {
  it('keeps only what is not done; the file is 0600 and its directory 0700', async () => {
    const dir = newDir();
    const spool = await Spool.open(dir, prefix);
    try {
      const a = finishArgs(1, 'SA');
      const b = finishArgs(2, 'SB');
      const idA = await spool.append(a);
      const idB = await spool.append(b);
      expect(idA).not.toBe(idB);
      expect(spool.outstanding).toBe(2);
      await spool.done(idA);
      expect(spool.outstanding).toBe(1);
      // Done twice, or an unknown id: nothing changes.
      await spool.done(idA);
      await spool.done('nope');

      expect(await readSpool(spool.path)).toEqual([{ id: idB, args: b }]);
      expect(statSync(spool.path).mode & 0o777).toBe(0o600);
      expect(statSync(dir).mode & 0o777).toBe(0o700);
      expect(spool.path.startsWith(join(dir, `${prefix}.${hostTag()}.${process.pid}.`))).toBe(true);
      expect(spool.path.endsWith('.spool')).toBe(true);
    } finally {
      await spool.close();
    }
  });

  it('close() keeps a file with an outstanding entry and removes one with none', async () => {
    const dir = newDir();
    const kept = await Spool.open(dir, prefix);
    const args = finishArgs(3, 'SC');
    const id = await kept.append(args);
    await kept.close();
    expect(existsSync(kept.path)).toBe(true);
    expect(await readSpool(kept.path)).toEqual([{ id, args }]);
    await expect(kept.append(args)).rejects.toThrow(/closed/);

    const empty = await Spool.open(dir, prefix);
    await empty.done(await empty.append(finishArgs(4, 'SD')));
    await empty.close();
    expect(existsSync(empty.path)).toBe(false);
    // A spool never written to leaves nothing either.
    const unused = await Spool.open(dir, prefix);
    await unused.close();
    expect(existsSync(unused.path)).toBe(false);
  });

  it("abandonedSpools lists a dead writer's file of this host, never this process's or another prefix's", async () => {
    const dir = newDir();
    const live = await Spool.open(dir, prefix);
    try {
      await live.append(finishArgs(5, 'SE'));
      const pid = deadPid();
      const dead = join(dir, spoolName(prefix, pid));
      writeFileSync(dead, entryLine('e1', finishArgs(6, 'SF')), { mode: 0o600 });
      writeFileSync(join(dir, spoolName(`${prefix}x`, pid)), entryLine('e2', finishArgs(7, 'SG')));
      writeFileSync(join(dir, spoolName(`other-${prefix}`, pid)), entryLine('e3', finishArgs(8, 'SH')));
      // Of this host with a live pid (the test runner's parent): its writer is alive.
      writeFileSync(join(dir, spoolName(prefix, process.ppid)), entryLine('e4', finishArgs(9, 'SI')));
      // Not a spool file name at all.
      writeFileSync(join(dir, `${prefix}.notes.txt`), 'x');

      expect(abandonedSpools(dir, prefix)).toEqual([dead]);
      expect(abandonedSpools(join(dir, 'missing'), prefix)).toEqual([]);
    } finally {
      await live.close();
    }
  });

  it('a file left by an earlier process with the same pid on this host (a restarted container) is abandoned', async () => {
    // In a container, `work` is PID 1 at every start (ENTRYPOINT node) and a container restarted by its
    // restart policy keeps its hostname: the spool its previous run left has this host and this pid.
    // Its name says it was opened before this process started, so it cannot be this process's.
    const dir = newDir();
    mkdirSync(dir, { recursive: true });
    const before = Math.floor(performance.timeOrigin) - 60_000;
    const file = join(dir, `${prefix}.${hostTag()}.${process.pid}.${before}.0f0f0f.spool`);
    const args = finishArgs(14, 'SN');
    writeFileSync(file, entryLine('e1', args));
    expect(abandonedSpools(dir, prefix)).toEqual([file]);
    // And so the next `work` replays it: the response is not lost.
    const recorder = new Recorder({ store, logger: createLogger({ level: 'silent' }) });
    expect(await recorder.replay(dir, prefix)).toEqual({ files: 1, entries: 1 });
    expect((await store.get('acme', 14))?.x).toBe('SN');
  });

  it("another host's file is abandoned only once untouched for SPOOL_STALE_MS", async () => {
    const dir = newDir();
    mkdirSync(dir, { recursive: true });
    const file = join(dir, spoolName(prefix, 4242, 'another-host'));
    writeFileSync(file, entryLine('e1', finishArgs(10, 'SJ')));
    expect(abandonedSpools(dir, prefix)).toEqual([]);
    const old = new Date(Date.now() - SPOOL_STALE_MS - 5_000);
    utimesSync(file, old, old);
    expect(abandonedSpools(dir, prefix)).toEqual([file]);
  });

  it('takeSpool takes a file once; a second take gets undefined', async () => {
    const dir = newDir();
    mkdirSync(dir, { recursive: true });
    const file = join(dir, spoolName(prefix, deadPid()));
    writeFileSync(file, entryLine('e1', finishArgs(11, 'SK')));
    const taken = await takeSpool(file);
    // The replayer's host, pid and start are in the name: replayers elsewhere judge it by them.
    expect(taken).toMatch(
      new RegExp(
        `^${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\.replaying\\.${hostTag()}\\.${process.pid}\\.\\d+$`,
      ),
    );
    expect(existsSync(file)).toBe(false);
    expect(existsSync(taken as string)).toBe(true);
    expect(await takeSpool(file)).toBeUndefined();
    // The taken file is this live process's now: nobody else lists it.
    expect(abandonedSpools(dir, prefix)).toEqual([]);
  });

  it('a torn last line (a kill mid-write) is skipped', async () => {
    const dir = newDir();
    mkdirSync(dir, { recursive: true });
    const file = join(dir, spoolName(prefix, deadPid()));
    const a = finishArgs(12, 'SL');
    const b = finishArgs(13, 'SM');
    const whole = entryLine('e1', a);
    const torn = entryLine('e2', b);
    // A line that parses but is no entry (no args) is not one either.
    const noArgs = `${JSON.stringify({ id: 'e0' })}\n`;
    writeFileSync(file, noArgs + whole + torn.slice(0, Math.floor(torn.length / 2)));
    expect(await readSpool(file)).toEqual([{ id: 'e1', args: a }]);
    // A done line for an entry retires it, wherever it comes.
    appendFileSync(file, `\n${JSON.stringify({ done: 'e1' })}\n`);
    expect(await readSpool(file)).toEqual([]);
  });
});

describe('Recorder.replay', () => {
  it("writes a dead process's entries to Redis once, deletes the file, and a second replay writes nothing twice", async () => {
    const dir = newDir();
    mkdirSync(dir, { recursive: true });
    const logLines: string[] = [];
    const logger = createLogger({
      level: 'info',
      destination: { write: (l: string) => void logLines.push(l) },
    });
    const recorder = new Recorder({ store, logger });
    const a = finishArgs(20, 'RA');
    const b = finishArgs(21, 'RB');
    const c = finishArgs(22, 'RC');
    const file = join(dir, spoolName(prefix, deadPid()));
    // c is done: only a and b are outstanding.
    writeFileSync(
      file,
      entryLine('e1', a) + entryLine('e2', b) + entryLine('e3', c) + `${JSON.stringify({ done: 'e3' })}\n`,
    );
    const copy = join(root, `copy-${dirs}.spool`);
    copyFileSync(file, copy);
    // Other tests of this file write to the same stream: count from here.
    const before = await redis.xlen(keys.audit('acme'));
    const countedBefore = (await store.runCounts('acme', 'run-spool')).transferred ?? 0;

    expect(await recorder.replay(dir, prefix)).toEqual({ files: 1, entries: 2 });
    expect(readdirSync(dir)).toEqual([]);
    const r20 = await store.get('acme', 20);
    expect(r20).toMatchObject({ b: 'transferred', x: 'RA', a: 1 });
    // Final, so compacted: the attempt kept as its short hash, the history in the record's story entry.
    expect(r20?.ah).toEqual([shortAttemptId(a.attemptId)]);
    expect((await store.getWithStory('acme', 20))?.record.h).toEqual([[a.at, 'transferred', 200, 10]]);
    expect((await store.get('acme', 21))?.x).toBe('RB');
    expect(await store.get('acme', 22)).toBeUndefined();
    expect(await redis.xlen(keys.audit('acme'))).toBe(before + 4); // 2 answers, 2 story entries
    const counts = await store.runCounts('acme', 'run-spool');
    expect(counts.transferred).toBe(countedBefore + 2);
    expect(logLines.some((l) => l.includes('replayed 2 responses from 1 spool files'))).toBe(true);

    // The same file again (a replayer killed before it deleted the file): nothing is written twice.
    copyFileSync(copy, file);
    expect(await recorder.replay(dir, prefix)).toEqual({ files: 1, entries: 2 });
    expect(existsSync(file)).toBe(false);
    expect(await redis.xlen(keys.audit('acme'))).toBe(before + 4);
    const again = await store.get('acme', 20);
    expect(again).toEqual(r20);
    expect(again?.a).toBe(1);
    expect(await store.runCounts('acme', 'run-spool')).toEqual(counts);

    // A file being replayed by a process that died is taken again.
    const taken = join(dir, `${spoolName(prefix, deadPid())}.replaying.${hostTag()}.${deadPid()}.1`);
    copyFileSync(copy, taken);
    expect(abandonedSpools(dir, prefix)).toEqual([taken]);
    expect(await recorder.replay(dir, prefix)).toEqual({ files: 1, entries: 2 });
    expect(readdirSync(dir)).toEqual([]);
    expect(await redis.xlen(keys.audit('acme'))).toBe(before + 4);
    expect((await store.get('acme', 20))?.a).toBe(1);
  });

  it("leaves this process's own spool alone", async () => {
    const dir = newDir();
    const spool = await Spool.open(dir, prefix);
    try {
      await spool.append(finishArgs(30, 'RD'));
      const recorder = new Recorder({ store, logger: createLogger({ level: 'silent' }) });
      expect(await recorder.replay(dir, prefix)).toEqual({ files: 0, entries: 0 });
      expect(existsSync(spool.path)).toBe(true);
      expect(await store.get('acme', 30)).toBeUndefined();
    } finally {
      await spool.close();
    }
  });
});
