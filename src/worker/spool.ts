// The write-ahead spool (docs/guarantees.md): a response is fsynced here before its first Redis write,
// and replayed by the next `work` if it never reached Redis. One NDJSON file per process; appends that
// arrive together share one fsync. Done lines need no fsync: a lost one only means a harmless replay.
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { open, readFile, rename, unlink, type FileHandle } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import type { FinishArgs } from '../outcomes/store.ts';
import { LearnerTransferError } from '../core/errors.ts';

export interface SpoolEntry {
  id: string;
  args: FinishArgs;
}

/** A file of another host (a container that is gone) counts as abandoned after this long untouched. */
export const SPOOL_STALE_MS = 120_000;
/** Once every entry of the file is done and it is larger than this, it is truncated. */
const COMPACT_BYTES = 1024 * 1024;
const TOUCH_MS = 30_000;

interface Pending {
  line: string;
  sync: boolean;
  resolve: () => void;
  reject: (err: Error) => void;
}

/** This host's name as it appears in spool file names. */
export function hostTag(): string {
  return (
    hostname()
      .replace(/[^A-Za-z0-9_-]/g, '_')
      .slice(0, 64) || 'host'
  );
}

export class Spool {
  readonly path: string;
  readonly #fh: FileHandle;
  readonly #outstanding = new Set<string>();
  #queue: Pending[] = [];
  #flushing: Promise<void> | undefined;
  #bytes = 0;
  #touch: NodeJS.Timeout;
  #closed = false;

  private constructor(path: string, fh: FileHandle) {
    this.path = path;
    this.#fh = fh;
    // The file's mtime says its owner is alive, for replayers on other hosts sharing the directory.
    this.#touch = setInterval(() => {
      const now = new Date();
      this.#fh.utimes(now, now).catch(() => {});
    }, TOUCH_MS);
    this.#touch.unref();
  }

  static async open(dir: string, prefix: string): Promise<Spool> {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    // mkdir's mode does not change a directory that exists (an image's, a volume's): set it.
    try {
      chmodSync(dir, 0o700);
    } catch {
      // not ours to change (a mounted volume owned by someone else): the files are 0600 anyway
    }
    const name = `${prefix}.${hostTag()}.${process.pid}.${Date.now()}.${randomBytes(3).toString('hex')}.spool`;
    const path = join(dir, name);
    return new Spool(path, await open(path, 'a', 0o600));
  }

  /** Entries written and not yet done. */
  get outstanding(): number {
    return this.#outstanding.size;
  }

  /**
   * When the oldest entry not yet done was written (ms since the epoch; its id starts with that time in
   * base 36), or null when none is outstanding. Entries are kept in the order written, so it is the first.
   */
  get oldestAt(): number | null {
    for (const id of this.#outstanding) return parseInt(id.slice(0, id.indexOf('-')), 36);
    return null;
  }

  /** Appends an entry and resolves once it is on disk (fsynced). Returns its id. */
  async append(args: FinishArgs): Promise<string> {
    const id = `${Date.now().toString(36)}-${randomBytes(6).toString('hex')}`;
    this.#outstanding.add(id);
    try {
      await this.#write(`${JSON.stringify({ id, args } satisfies SpoolEntry)}\n`, true);
    } catch (err) {
      this.#outstanding.delete(id);
      throw err;
    }
    return id;
  }

  /** Retires an entry: its audit entry and outcome are in Redis. */
  async done(id: string): Promise<void> {
    if (!this.#outstanding.delete(id)) return;
    await this.#write(`${JSON.stringify({ done: id })}\n`, false);
  }

  /** Flushes; removes the file when nothing in it is outstanding (else it stays for a replay). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#touch);
    while (this.#flushing) await this.#flushing;
    await this.#fh.close();
    if (this.#outstanding.size === 0) await unlink(this.path).catch(() => {});
  }

  #write(line: string, sync: boolean): Promise<void> {
    if (this.#closed)
      return Promise.reject(new LearnerTransferError('LT_INTERNAL', `spool ${this.path} is closed`));
    return new Promise<void>((resolve, reject) => {
      this.#queue.push({ line, sync, resolve, reject });
      this.#kick();
    });
  }

  #kick(): void {
    if (this.#flushing) return;
    this.#flushing = this.#flush().finally(() => {
      this.#flushing = undefined;
      if (this.#queue.length > 0) this.#kick();
    });
  }

  async #flush(): Promise<void> {
    const batch = this.#queue;
    this.#queue = [];
    try {
      const data = batch.map((p) => p.line).join('');
      await this.#fh.write(data);
      this.#bytes += Buffer.byteLength(data);
      if (batch.some((p) => p.sync)) await this.#fh.datasync();
      if (this.#outstanding.size === 0 && this.#bytes > COMPACT_BYTES) {
        await this.#fh.truncate(0);
        this.#bytes = 0;
      }
      for (const p of batch) p.resolve();
    } catch (err) {
      for (const p of batch) p.reject(err as Error);
    }
  }
}

/** The outstanding entries of a spool file (a torn last line, from a kill mid-write, is skipped). */
export async function readSpool(path: string): Promise<SpoolEntry[]> {
  const text = await readFile(path, 'utf8');
  const entries = new Map<string, SpoolEntry>();
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      continue;
    }
    const o = parsed as { id?: string; args?: FinishArgs; done?: string };
    if (typeof o.done === 'string') entries.delete(o.done);
    else if (typeof o.id === 'string' && o.args) entries.set(o.id, { id: o.id, args: o.args });
  }
  return [...entries.values()];
}

/** Whether a process with this pid runs on this host. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Spool files of this prefix whose writer is gone: on this host, its pid is not running, or it is this
 * process's pid but the file is older than this process (a restarted container runs node as pid 1
 * again); from another host (a container that was replaced), untouched for SPOOL_STALE_MS. A file being
 * replayed is judged by its replayer the same way.
 */
export function abandonedSpools(dir: string, prefix: string, now = Date.now()): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const host = hostTag();
  const started = performance.timeOrigin;
  const out: string[] = [];
  for (const name of names) {
    if (!name.startsWith(`${prefix}.`)) continue;
    const rest = name.slice(prefix.length + 1);
    // host.pid.start.rand.spool, or that + .replaying.<host>.<pid>.<start>
    const m =
      /^([A-Za-z0-9_-]+)\.(\d+)\.(\d+)\.[0-9a-f]+\.spool(?:\.replaying\.([A-Za-z0-9_-]+)\.(\d+)\.(\d+))?$/.exec(
        rest,
      );
    if (!m) continue;
    const ownerHost = m[4] ?? m[1];
    const ownerPid = Number(m[5] ?? m[2]);
    const ownerStart = Number(m[6] ?? m[3]);
    const path = join(dir, name);
    let gone: boolean;
    if (ownerHost !== host) gone = now - statSync(path).mtimeMs > SPOOL_STALE_MS;
    else if (ownerPid === process.pid) gone = ownerStart < started;
    else gone = !alive(ownerPid);
    if (gone) out.push(path);
  }
  return out;
}

/** Takes a file for replay by renaming it (atomic: two replayers never both take it). */
export async function takeSpool(path: string): Promise<string | undefined> {
  const base = path.replace(/\.replaying\.[A-Za-z0-9_-]+\.\d+\.\d+$/, '');
  const taken = `${base}.replaying.${hostTag()}.${process.pid}.${Date.now()}`;
  try {
    await rename(path, taken);
    return taken;
  } catch {
    return undefined;
  }
}
