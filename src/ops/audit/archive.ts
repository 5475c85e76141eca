// The audit archiver of `work`: moves each organization's audit stream into day files and trims it
// (decision 13; docs/audit-archive.md). One exporter at a time under a lease; a write is noted first, so
// the next process cuts a dead write back; a pass reads only the organizations marked since.
import { randomUUID } from 'node:crypto';
import type { Logger } from '../../core/log.ts';
import { isValidOrgKey, type Keys } from '../../core/keys.ts';
import { loadScripts } from '../../redis/scripts.ts';
import type { RedisClient } from '../../redis/client.ts';
import { AuditStream, nextId } from '../../outcomes/audit-stream.ts';
import {
  appendMember,
  archiveLine,
  dayFile,
  dayOf,
  gzipMember,
  prepareFile,
  truncateTo,
  verifyMember,
} from './archive-file.ts';
import { archiveDiskId, settleNotes } from './archive-note.ts';

/** The archiver's scripts, beside this module: its lease, and the commit of a write. */
export const AUDIT_SCRIPTS = loadScripts(new URL('./', import.meta.url), ['audit-lease', 'audit-commit']);

/** The most one write appends (uncompressed): entries are read 1000 at a time, and a few may be big. */
const MAX_WRITE_BYTES = 8 * 1024 * 1024;

export interface ArchiverOptions {
  dir: string;
  /** This process's lease holder id (default: random). */
  holder?: string;
  /** How long the lease lasts without a renewal (default 60 s: far above one write). */
  leaseMs?: number;
  /** Entries per write (default 1000: a few MB at most, one XRANGE). */
  batch?: number;
  logger?: Logger | undefined;
}

export interface ArchivePass {
  /** False when another process held the lease: this pass did nothing. */
  ran: boolean;
  archived: number;
  trimmed: number;
  /** Organizations whose archive failed this pass (marked again, tried next pass). */
  failed: string[];
}

export class AuditArchiver {
  readonly #redis: RedisClient;
  readonly #keys: Keys;
  readonly #stream: AuditStream;
  readonly #dir: string;
  readonly #holder: string;
  readonly #leaseMs: number;
  readonly #batch: number;
  readonly #logger: Logger | undefined;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<unknown> = Promise.resolve();
  #sweep: string[] = [];

  constructor(redis: RedisClient, keys: Keys, options: ArchiverOptions) {
    this.#redis = redis;
    this.#keys = keys;
    this.#stream = new AuditStream(redis, keys);
    this.#dir = options.dir;
    this.#holder = options.holder ?? randomUUID();
    this.#leaseMs = options.leaseMs ?? 60_000;
    this.#batch = options.batch ?? 1000;
    this.#logger = options.logger;
  }

  #lease(op: 'take' | 'renew' | 'free'): Promise<boolean> {
    return AUDIT_SCRIPTS.run(
      this.#redis,
      'audit-lease',
      [this.#keys.auditArchiveLock()],
      [op, this.#holder, this.#leaseMs],
    ).then((r) => Number(r) === 1);
  }

  /**
   * Runs `fn` holding the archiver's lease (no archive write anywhere meanwhile): the rewrites of day
   * files (ops/audit/rewrite.ts). `renew` before each file; it throws when the lease was lost. Undefined
   * when another process holds the lease now.
   */
  async withLease<T>(fn: (renew: () => Promise<void>) => Promise<T>): Promise<T | undefined> {
    if (!(await this.#lease('take'))) return undefined;
    const renew = async () => {
      if (!(await this.#lease('renew'))) throw new LeaseLost();
    };
    try {
      return await fn(renew);
    } finally {
      await this.#lease('free').catch(() => false);
    }
  }

  /**
   * One pass over the marked organizations, and `sweep` (looked at whether marked or not). Idle, it costs
   * one SCARD. Never throws for one organization: it is marked again and logged.
   */
  async runOnce(sweep: readonly string[] = []): Promise<ArchivePass> {
    const pass: ArchivePass = { ran: false, archived: 0, trimmed: 0, failed: [] };
    if (sweep.length === 0 && (await this.#redis.scard(this.#keys.auditUnarchived())) === 0) return pass;
    if (!(await this.#lease('take'))) return pass;
    pass.ran = true;
    try {
      // Only keys that name a directory of their own (the set is ours; a key is never a path).
      const marked = (await this.#stream.takeUnarchived()).filter(isValidOrgKey);
      const orgs = [...new Set([...marked, ...sweep])];
      // This directory's id, read once a pass (the disk could be swapped between passes).
      let disk: Promise<string> | undefined;
      for (const [i, org] of orgs.entries()) {
        try {
          disk ??= archiveDiskId(this.#dir);
          const r = await this.#archiveOrg(org, await disk);
          pass.archived += r.archived;
          pass.trimmed += r.trimmed;
        } catch (err) {
          pass.failed.push(org);
          await this.#stream.markUnarchived(org).catch(() => undefined);
          if (err instanceof LeaseLost) {
            for (const rest of orgs.slice(i + 1)) await this.#stream.markUnarchived(rest);
            break;
          }
          this.#logger?.warn(
            { org, err: (err as Error).message },
            'audit archive: could not archive this organization (nothing of it trimmed; tried again next pass)',
          );
        }
      }
    } finally {
      await this.#lease('free').catch(() => false);
    }
    if (pass.archived > 0) this.#logger?.info({ ...pass, dir: this.#dir }, 'audit archived and trimmed');
    return pass;
  }

  async #archiveOrg(org: string, disk: string): Promise<{ archived: number; trimmed: number }> {
    const state = await this.#stream.state(org);
    // A write a dead exporter left unconfirmed: its file cut back (if it is that file, on this disk), its
    // entries are still in the stream.
    await settleNotes(this.#stream, org, state, disk, this.#logger);
    // Up to the newest entry now: a busy stream does not keep one pass going for ever.
    const upto = await this.#stream.lastId(org);
    let last = state.last;
    let archived = 0;
    let trimmed = 0;
    while (upto) {
      const batch = await this.#stream.read(org, last, upto, this.#batch);
      const first = batch[0];
      if (!first) break;
      const day = dayOf(first.id);
      // One day file per write, and a few MB at most (a batch of big unreadable bodies is cut short).
      const lines: string[] = [];
      let bytes = 0;
      for (const e of batch) {
        if (dayOf(e.id) !== day || (lines.length > 0 && bytes > MAX_WRITE_BYTES)) break;
        const line = archiveLine(org, e);
        lines.push(line);
        bytes += line.length;
      }
      const lastId = (batch[lines.length - 1] ?? first).id;
      if (!(await this.#lease('renew'))) throw new LeaseLost();
      const file = dayFile(this.#dir, org, day);
      const member = await gzipMember(lines.join(''));
      const { size, ino } = await prepareFile(file);
      await this.#stream.begin(org, file, size, this.#holder, { disk, ino, end: size + member.length });
      let before = size;
      try {
        before = await appendMember(file, member);
        await verifyMember(file, before, { count: lines.length, lastId });
        const n = await this.#commit(org, lastId);
        if (n < 0) throw new LeaseLost();
        trimmed += n;
      } catch (err) {
        await this.#undo(org, file, before);
        throw err;
      }
      archived += lines.length;
      last = lastId;
    }
    return { archived, trimmed };
  }

  /** The cursor and the trim, if the write's note is still this holder's (audit-commit.lua); -1 if not. */
  async #commit(org: string, lastId: string): Promise<number> {
    const k = this.#keys;
    const n = await AUDIT_SCRIPTS.run(
      this.#redis,
      'audit-commit',
      [k.auditArchive(org), k.audit(org)],
      [this.#holder, lastId, nextId(lastId)],
    );
    return Number(n);
  }

  /**
   * A write that failed, or whose commit was refused (this process stalled past its lease): cut back to
   * where this write began, unless another holder's write is under way (it may have appended since; the
   * readers skip a line whose id is not after the previous one). Undone now if the disk lets us;
   * otherwise the note stays and the next pass undoes it.
   */
  async #undo(org: string, file: string, size: number): Promise<void> {
    const holder = await this.#stream.noteHolder(org).catch(() => undefined);
    if (holder !== this.#holder && holder !== '') return;
    const cut = await truncateTo(file, size).then(
      () => true,
      () => false,
    );
    if (cut && holder === this.#holder) await this.#stream.abandon(org).catch(() => undefined);
  }

  /**
   * Archives now (sweeping `sweep`: until a pass of this process runs, it is kept for the next one), then
   * every `intervalMs` (marked organizations only).
   */
  start(intervalMs: number, sweep: readonly string[]): void {
    this.#sweep = [...sweep];
    this.#queue();
    this.#timer = setInterval(() => this.#queue(), intervalMs);
    this.#timer.unref();
  }

  /** At a graceful stop: no more timer, the pass under way finished, and one last pass (unless told not). */
  async stop(lastPass = true): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    if (lastPass) this.#queue();
    await this.#running;
  }

  /** Passes one after another, never two at once in one process; a failed pass is logged, not thrown. */
  #queue(): void {
    this.#running = this.#running
      .then(async () => {
        const pass = await this.runOnce(this.#sweep);
        if (pass.ran) this.#sweep = [];
      })
      .catch((err: Error) => this.#logger?.warn({ err: err.message }, 'audit archive pass failed'));
  }
}

class LeaseLost extends Error {
  constructor() {
    super('the audit archive lease was lost (another process took it over)');
  }
}
