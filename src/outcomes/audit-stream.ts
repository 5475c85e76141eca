// The audit stream as the archive sees it: entries verbatim, the archive's cursor, and the trim. Stream
// ids only grow (XADD *), so trimming up to the last exported id never drops an entry added later.
import type { Keys } from '../core/keys.ts';
import type { RedisClient } from '../redis/client.ts';

/** One stream entry: its id and its fields as written. */
export interface RawAuditEntry {
  id: string;
  fields: Record<string, string>;
}

/** The archive's state of one organization (keys.auditArchive). */
export interface ArchiveState {
  /** The last stream id safely in the archive files ('' = none yet). */
  last: string;
  /** A write under way (or cut short by a crash): the day file and its size before the write. */
  pending?: PendingWrite;
  /** Dead writes' notes for other archive disks, by disk id (ops/audit/archive-note.ts). */
  parked?: Record<string, ParkedWrite>;
}

/** Which file a note is for: the archive directory's id and the file's inode. */
export interface FileIdentity {
  disk: string;
  ino: string;
}

export interface PendingWrite {
  file: string;
  size: number;
  /** Absent in a note the previous release wrote (it noted the path and the size only). */
  identity?: FileIdentity | undefined;
  /** Where the write should end (size + its gzip member), when noted. */
  end?: number | undefined;
}

/** A note moved aside: what the dead write appended is after `size` and ends by `end`. */
export interface ParkedWrite extends FileIdentity {
  file: string;
  size: number;
  end: number;
}

/** A note's JSON field; unreadable (never written so by this code): none. */
function parseNote<T>(value: string | undefined): T | undefined {
  if (value === undefined) return undefined;
  try {
    return JSON.parse(value) as T;
  } catch {
    return undefined;
  }
}

const NOTE_FIELDS = ['file', 'size', 'holder', 'identity'] as const;
const PARKED = 'parked:';

export function fieldsOf(flat: readonly string[]): Record<string, string> {
  const f: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) f[flat[i] as string] = flat[i + 1] as string;
  return f;
}

/** The id right after `id` (XTRIM MINID keeps ids >= it: every id up to `id` goes). */
export function nextId(id: string): string {
  const [ms, seq] = id.split('-');
  return `${ms}-${BigInt(seq ?? '0') + 1n}`;
}

/** When Redis wrote the entry (ms): the time part of its id. */
export function idTime(id: string): number {
  return Number(id.split('-')[0]);
}

/** Compares two stream ids (-1, 0, 1). */
export function compareIds(a: string, b: string): number {
  const [am, as] = a.split('-').map((x) => BigInt(x));
  const [bm, bs] = b.split('-').map((x) => BigInt(x));
  if (am !== bm) return (am ?? 0n) < (bm ?? 0n) ? -1 : 1;
  if (as === bs) return 0;
  return (as ?? 0n) < (bs ?? 0n) ? -1 : 1;
}

export class AuditStream {
  readonly #redis: RedisClient;
  readonly #keys: Keys;

  constructor(redis: RedisClient, keys: Keys) {
    this.#redis = redis;
    this.#keys = keys;
  }

  /** Entries after `after` ('' = from the start) up to `upto` included, at most `count`. */
  async read(org: string, after: string, upto: string, count: number): Promise<RawAuditEntry[]> {
    const start = after ? `(${after}` : '-';
    const batch = await this.#redis.xrange(this.#keys.audit(org), start, upto, 'COUNT', count);
    return batch.map(([id, flat]) => ({ id, fields: fieldsOf(flat) }));
  }

  /** The id of the newest entry ('' when the stream is empty or absent). */
  async lastId(org: string): Promise<string> {
    const [last] = await this.#redis.xrevrange(this.#keys.audit(org), '+', '-', 'COUNT', 1);
    return last?.[0] ?? '';
  }

  /** Every entry up to `id` included goes; later ones stay. Returns how many went. */
  async trimThrough(org: string, id: string): Promise<number> {
    return this.#redis.xtrim(this.#keys.audit(org), 'MINID', nextId(id));
  }

  async state(org: string): Promise<ArchiveState> {
    const h = await this.#redis.hgetall(this.#keys.auditArchive(org));
    const last = h.last ?? '';
    const state: ArchiveState = { last };
    for (const [field, value] of Object.entries(h)) {
      const note = field.startsWith(PARKED) ? parseNote<ParkedWrite>(value) : undefined;
      if (note) (state.parked ??= {})[field.slice(PARKED.length)] = note;
    }
    if (h.file === undefined) return state;
    state.pending = { file: h.file, size: Number(h.size ?? 0) };
    // The identity is the note's only if the same holder wrote both (an older release writes none).
    const id = parseNote<FileIdentity & { holder: string; end?: number }>(h.identity);
    if (id && id.holder === h.holder) {
      state.pending.identity = { disk: id.disk, ino: id.ino };
      state.pending.end = id.end;
    }
    return state;
  }

  /**
   * Before a write: the file, its size, its holder and identity, so a crash before the commit
   * (ops/audit/audit-commit.lua) cuts back exactly that file to that size.
   */
  async begin(
    org: string,
    file: string,
    size: number,
    holder: string,
    identity?: FileIdentity & { end: number },
  ): Promise<void> {
    const key = this.#keys.auditArchive(org);
    const m = this.#redis.multi().hset(key, 'file', file, 'size', String(size), 'holder', holder);
    if (identity) m.hset(key, 'identity', JSON.stringify({ holder, ...identity }));
    else m.hdel(key, 'identity');
    await m.exec();
  }

  /** Whose write the note is ('' when none). */
  async noteHolder(org: string): Promise<string> {
    return (await this.#redis.hget(this.#keys.auditArchive(org), 'holder')) ?? '';
  }

  /** The write was given up and undone: nothing is pending. */
  async abandon(org: string): Promise<void> {
    await this.#redis.hdel(this.#keys.auditArchive(org), ...NOTE_FIELDS);
  }

  /** A dead write's note for a file on another disk: moved aside for that disk. */
  async park(org: string, note: ParkedWrite): Promise<void> {
    const key = this.#keys.auditArchive(org);
    await this.#redis
      .multi()
      .hset(key, PARKED + note.disk, JSON.stringify(note))
      .hdel(key, ...NOTE_FIELDS)
      .exec();
  }

  /** A parked note this disk has dealt with. */
  async unpark(org: string, disk: string): Promise<void> {
    await this.#redis.hdel(this.#keys.auditArchive(org), PARKED + disk);
  }

  /** Marks that an organization's stream has an entry to archive (one SADD; cheap, idempotent). */
  async markUnarchived(org: string): Promise<void> {
    await this.#redis.sadd(this.#keys.auditUnarchived(), org);
  }

  /**
   * The organizations marked since the last call, unmarked BEFORE their streams are read: a later
   * entry marks its organization again, so none is missed.
   */
  async takeUnarchived(): Promise<string[]> {
    const key = this.#keys.auditUnarchived();
    const orgs = await this.#redis.smembers(key);
    if (orgs.length > 0) await this.#redis.srem(key, ...orgs);
    return orgs.sort();
  }
}
