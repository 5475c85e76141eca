// The resumable cursor of one crawl (one hash of bounded size, docs/crawl.md) and the set of learners it
// selected. A page is committed only after its learners are enqueued: a crash re-reads it, and job ids
// add nothing twice.
import type { RedisClient } from '../../redis/client.ts';
import type { Keys } from '../../core/keys.ts';
import { decodeMarks, encodeMarks, marksFromPages, type WalkMarks } from './page-marks.ts';

/** Counters kept per crawl (`skip:<reason>`, `done:<bucket>`). */
export const CURSOR_COUNTERS = ['seen', 'selected', 'enqueued', 'alreadyQueued'] as const;
export type CursorCounter = (typeof CURSOR_COUNTERS)[number];

export interface CursorState {
  runId: string;
  status: 'running' | 'done';
  /** The filters the crawl was started with, as JSON: a resume must not change them. */
  filters: string;
  /** Every page before this one is handled (pass 1). */
  next: number;
  counters: Record<CursorCounter, number>;
  skipped: Record<string, number>;
  done: Record<string, number>;
  /** What the walker remembers of the pages handled (undefined: none handled yet). */
  marks: WalkMarks | undefined;
}

/** How long a finished crawl's cursor stays for inspection; a running one never expires. */
const DONE_TTL_S = 7 * 86_400;

export class CrawlCursor {
  readonly #redis: RedisClient;
  readonly key: string;
  readonly selectedKey: string;

  constructor(redis: RedisClient, keys: Keys, org: string, crawlId: string) {
    this.#redis = redis;
    this.key = keys.crawlCursor(org, crawlId);
    this.selectedKey = keys.crawlSelected(org, crawlId);
  }

  async load(): Promise<CursorState | undefined> {
    const h = await this.#redis.hgetall(this.key);
    if (!h.runId) return undefined;
    const counters = Object.fromEntries(CURSOR_COUNTERS.map((c) => [c, Number(h[c] ?? 0)])) as Record<
      CursorCounter,
      number
    >;
    const skipped: Record<string, number> = {};
    const done: Record<string, number> = {};
    const legacy = new Map<number, { total: number; seq: number }>();
    for (const [field, value] of Object.entries(h)) {
      if (field.startsWith('skip:')) skipped[field.slice(5)] = Number(value);
      if (field.startsWith('done:')) done[field.slice(5)] = Number(value);
      if (field.startsWith('p:')) {
        const [total, seq] = value.split(':').map(Number);
        if (total !== undefined && seq !== undefined) legacy.set(Number(field.slice(2)), { total, seq });
      }
    }
    let marks = h.marks === undefined ? undefined : decodeMarks(h.marks);
    if (legacy.size > 0) {
      // A crawl of an earlier release: its per-page fields become marks, in one step with their removal.
      marks ??= marksFromPages(legacy);
      marks.seq = Math.max(marks.seq, Number(h.seq ?? 0));
      const m = this.#redis.multi().hset(this.key, 'marks', encodeMarks(marks));
      const fields = [...legacy.keys()].map((page) => `p:${page}`);
      for (let i = 0; i < fields.length; i += 1000) m.hdel(this.key, ...fields.slice(i, i + 1000));
      await m.exec();
    }
    return {
      runId: h.runId,
      status: h.status === 'done' ? 'done' : 'running',
      filters: h.filters ?? '',
      next: Number(h.next ?? 1),
      counters,
      skipped,
      done,
      marks,
    };
  }

  /** Starts afresh (a finished or abandoned crawl under the same id is replaced). */
  async start(runId: string, filters: string): Promise<void> {
    await this.#redis
      .multi()
      .del(this.key, this.selectedKey)
      .hset(this.key, { runId, status: 'running', filters, next: 1, startedAt: Date.now() })
      .exec();
  }

  /** Learners of `ids` this crawl selected before (a re-read page, or one read again after a kill). */
  async selectedBefore(ids: readonly number[]): Promise<Set<number>> {
    if (ids.length === 0) return new Set();
    const flags = await this.#redis.smismember(this.selectedKey, ...ids.map(String));
    return new Set(ids.filter((_, i) => flags[i] === 1));
  }

  /** Commits one handled page: marks, low-water page, selected ids and counters. */
  async commitPage(p: {
    page: number;
    /** PageRead.marks: the walker's marks with this page counted. */
    marks: string;
    next: number | undefined;
    selected: readonly number[];
    counters: Partial<Record<CursorCounter, number>>;
    skipped: Readonly<Record<string, number>>;
    done: Readonly<Record<string, number>>;
  }): Promise<void> {
    const m = this.#redis.multi();
    if (p.selected.length > 0) m.sadd(this.selectedKey, ...p.selected.map(String));
    const fields: Record<string, string | number> = { marks: p.marks, updatedAt: Date.now() };
    if (p.next !== undefined) fields.next = p.next;
    m.hset(this.key, fields);
    for (const [c, n] of Object.entries(p.counters)) if (n) m.hincrby(this.key, c, n);
    for (const [r, n] of Object.entries(p.skipped)) if (n) m.hincrby(this.key, `skip:${r}`, n);
    for (const [b, n] of Object.entries(p.done)) if (n) m.hincrby(this.key, `done:${b}`, n);
    await m.exec();
  }

  async finish(): Promise<void> {
    await this.#redis
      .multi()
      .hset(this.key, { status: 'done', finishedAt: Date.now() })
      .expire(this.key, DONE_TTL_S)
      .expire(this.selectedKey, DONE_TTL_S)
      .exec();
  }
}
