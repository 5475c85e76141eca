// Walks GET /1/learner page by page: bounded concurrency, pages handed on in page order, retries with
// backoff on the client's classified failures, and re-reads that make a list changing under the walk
// lose nobody.
//
// Why re-reads: the list is paged by position (page N = positions (N-1)*100+1..N*100). A learner
// removed before a page that is not read yet moves every later learner one position back, so the
// first learner of that page slides onto a page already read and no read would see it; an inserted
// learner lands on a page already read, or pushes the last learner of a read page onto the next (seen
// twice: callers dedupe by id). Every response carries `total`, so a change shows as a response whose
// total differs from the one before it (in arrival order). Pages read before the last such change may
// be stale: they are read again, and again while reads keep seeing changes, up to `maxPasses`. What
// totals cannot show (a removal and an insertion between the same two reads) is left to reconcile.
import { setTimeout as sleep } from 'node:timers/promises';
import { capDelayMs } from '../../api/retry-after.ts';
import type { ListResult } from '../../api/client.ts';
import type { Learner, ListPage } from '../../api/schemas.ts';
import { LearnerTransferError } from '../../errors.ts';

export interface ListReader {
  listLearners(page: number, token: string): Promise<ListResult>;
}

/** One read of one page, handed to onPage. */
export interface PageRead {
  page: number;
  /** 1 for the first walk over the list, 2.. for re-reads of pages the list changed under. */
  pass: number;
  learners: Learner[];
  total: number;
  lastPage: number;
  /** Arrival order of the response over the whole crawl (continues after a resume). */
  seq: number;
}

/** What is remembered of a page's latest read: its total then, and when (arrival order). */
export interface PageMark {
  total: number;
  seq: number;
}

export type OnPage = (read: PageRead) => Promise<'stop' | void> | 'stop' | void;

export interface WalkOptions {
  client: ListReader;
  /** Token secrets that may list; a 401 moves on to the next, until none is left. */
  tokens: readonly string[];
  concurrency?: number | undefined;
  /** Attempts after the first for server errors, network errors and bad bodies (default 5). */
  retries?: number | undefined;
  backoffMs?: number | undefined;
  maxBackoffMs?: number | undefined;
  /** Pass-1 start (a resumed crawl); pages before it are known through `history`. */
  startPage?: number | undefined;
  /** Latest read of pages already handled (a resumed crawl), for change detection. */
  history?: ReadonlyMap<number, PageMark> | undefined;
  /** Last arrival number used before a resume. */
  seqStart?: number | undefined;
  /** Most passes in all (default 4): a list that never stops changing must still end. */
  maxPasses?: number | undefined;
  signal?: AbortSignal | undefined;
  onPage: OnPage;
  /** Called for each failed try that will be retried (for logs). */
  onRetry?: ((page: number, code: string, waitMs: number) => void) | undefined;
}

export interface WalkResult {
  /** Page requests that returned a page. */
  requests: number;
  pass1Pages: number;
  rereads: number;
  passes: number;
  lastPage: number;
  total: number;
  /** True when onPage asked to stop (a --limit reached). */
  stopped: boolean;
  /** Pages that may still be stale after maxPasses (the list kept changing): run again or reconcile. */
  unsettledPages: number[];
}

/**
 * The page the service answered must be the page asked for. The spec: page N covers positions
 * (N-1)*per_page+1 to N*per_page, and current_page is the page requested. A service that ignores
 * ?page= (a proxy that drops the query, a changed parameter name) answers page 1 every time: read as
 * pages 2, 3, ... it would hand the same learners on again and never show the rest. Retrying does not
 * help; the walk stops with what came back. `from`/`to` are checked when given (the schema accepts
 * them absent or null, as on an empty page).
 */
export function checkPageAnswered(page: number, body: ListPage): void {
  const p = body.pagination;
  const count = body.data.length;
  const problems: string[] = [];
  if (p.current_page !== page) problems.push(`current_page ${p.current_page}`);
  if (count > p.per_page) problems.push(`${count} learners for per_page ${p.per_page}`);
  if (count > 0) {
    const first = (page - 1) * p.per_page + 1;
    const last = page * p.per_page;
    if (p.from !== null && p.from !== undefined && p.from !== first) {
      problems.push(`from ${p.from} where page ${page} starts at ${first}`);
    }
    if (p.to !== null && p.to !== undefined && (p.to < first || p.to > last)) {
      problems.push(`to ${p.to} outside ${first}..${last}`);
    }
  }
  if (problems.length === 0) return;
  throw new LearnerTransferError(
    'LT_INPUT_UNREADABLE',
    `listing learners: asked for page ${page}, the service answered ${problems.join(', ')} ` +
      `(current_page ${p.current_page}, from ${p.from ?? 'none'}, to ${p.to ?? 'none'}, per_page ${p.per_page}, ` +
      `${count} learners): it does not page as the spec says, so the walk stops rather than read the same ` +
      `learners again or miss the rest; check LEARNER_API_BASE_URL and any proxy in front of the service`,
  );
}

/** Errors that retrying cannot help on a list read. */
const FATAL = new Set(['not-found', 'forbidden', 'invalid-request']);

export class PageWalker {
  readonly #o: {
    [K in keyof Omit<WalkOptions, 'signal' | 'onRetry' | 'history'>]-?: Exclude<WalkOptions[K], undefined>;
  } & Pick<WalkOptions, 'signal' | 'onRetry'>;
  readonly #marks = new Map<number, PageMark>();
  /** Totals of every response in arrival order (seq -> total), for change detection. */
  readonly #totals: { seq: number; total: number }[] = [];
  #seq: number;
  #token = 0;
  #requests = 0;

  constructor(options: WalkOptions) {
    // An option given as undefined takes its default (a spread would keep the undefined).
    const given = Object.fromEntries(
      Object.entries(options).filter(([, v]) => v !== undefined),
    ) as unknown as WalkOptions;
    if (options.tokens.length === 0) {
      throw new LearnerTransferError('LT_NO_TOKEN', 'listing learners needs a token of the organization');
    }
    this.#o = {
      concurrency: 4,
      retries: 5,
      backoffMs: 500,
      maxBackoffMs: 30_000,
      startPage: 1,
      seqStart: 0,
      maxPasses: 4,
      ...given,
    };
    this.#seq = this.#o.seqStart;
    for (const [page, mark] of options.history ?? []) {
      this.#marks.set(page, mark);
      this.#totals.push({ seq: mark.seq, total: mark.total });
    }
    this.#totals.sort((a, b) => a.seq - b.seq);
  }

  async walk(): Promise<WalkResult> {
    const o = this.#o;
    let lastPage = o.startPage;
    let total = 0;
    let stopped = false;
    let pass = 1;
    let pass1Pages = 0;
    let rereads = 0;

    // Pass 1: startPage alone (it tells the last page), then on up to the last_page of the newest
    // response: a list that grows mid-walk is walked to its new end, one that shrinks stops earlier.
    let nextPage = o.startPage;
    let answered = false;
    const onRead = (read: PageRead) => {
      answered = true;
      lastPage = read.lastPage;
      total = read.total;
    };
    const first = await this.#run(pass, onRead, () => {
      if (nextPage > o.startPage && (!answered || nextPage > lastPage)) return undefined;
      return nextPage++;
    });
    pass1Pages = first.handled;
    stopped = first.stopped;

    let suspects = stopped ? [] : this.#suspects(lastPage);
    while (!stopped && suspects.length > 0 && pass < o.maxPasses) {
      pass++;
      const list = suspects;
      let i = 0;
      const r = await this.#run(pass, onRead, () => list[i++]);
      rereads += r.handled;
      stopped = r.stopped;
      suspects = stopped ? [] : this.#suspects(lastPage);
    }
    return {
      requests: this.#requests,
      pass1Pages,
      rereads,
      passes: pass,
      lastPage,
      total,
      stopped,
      unsettledPages: suspects,
    };
  }

  /** The arrival number of the last response whose total differs from the one before it. */
  #lastChange(): number {
    let last = 0;
    for (let i = 1; i < this.#totals.length; i++) {
      const prev = this.#totals[i - 1];
      const cur = this.#totals[i];
      if (prev && cur && prev.total !== cur.total) last = cur.seq;
    }
    return last;
  }

  /** Pages (within the list as it is now) whose latest read is older than the last change. */
  #suspects(lastPage: number): number[] {
    const change = this.#lastChange();
    if (change === 0) return [];
    const out: number[] = [];
    for (const [page, mark] of this.#marks) if (page <= lastPage && mark.seq < change) out.push(page);
    return out.sort((a, b) => a - b);
  }

  /**
   * Reads the pages `nextPage()` names (undefined: none for now), `concurrency` at a time, and hands
   * them to onPage strictly in the order they were named.
   */
  async #run(
    pass: number,
    onRead: (read: PageRead) => void,
    nextPage: () => number | undefined,
  ): Promise<{ handled: number; stopped: boolean }> {
    const o = this.#o;
    const results = new Map<number, PageRead>();
    let launched = 0;
    let next = 0;
    let handled = 0;
    let inFlight = 0;
    let stopped = false;
    let failure: { err: unknown } | undefined;
    let wake: (() => void) | undefined;

    const launch = () => {
      // Read ahead at most `concurrency` pages past the one being handled: memory stays bounded and a
      // killed crawl has read at most that many pages it did not commit.
      while (!stopped && !failure && launched - next < o.concurrency) {
        const page = nextPage();
        if (page === undefined) return;
        const index = launched++;
        inFlight++;
        this.#fetch(page)
          .then((body) => {
            const read: PageRead = {
              page,
              pass,
              learners: body.data,
              total: body.pagination.total,
              lastPage: body.pagination.last_page,
              seq: ++this.#seq,
            };
            this.#totals.push({ seq: read.seq, total: read.total });
            onRead(read);
            results.set(index, read);
          })
          .catch((err: unknown) => {
            failure ??= { err };
          })
          .finally(() => {
            inFlight--;
            wake?.();
          });
      }
    };
    const settle = async () => {
      while (inFlight > 0) await new Promise<void>((resolve) => (wake = resolve));
    };

    for (;;) {
      launch();
      let read: PageRead | undefined;
      while (!stopped && !failure && (read = results.get(next)) !== undefined) {
        // An abort stops handing pages on at once; the cursor has every page handled so far.
        if (o.signal?.aborted) {
          failure = { err: o.signal.reason };
          break;
        }
        this.#marks.set(read.page, { total: read.total, seq: read.seq });
        handled++;
        if ((await o.onPage(read)) === 'stop') stopped = true;
        results.delete(next++);
        if (!stopped) launch();
      }
      if (failure) {
        await settle();
        throw failure.err;
      }
      if (stopped) {
        await settle();
        return { handled, stopped };
      }
      if (inFlight === 0 && !results.has(next)) {
        launch();
        if (inFlight === 0) return { handled, stopped };
      }
      if (!results.has(next)) await new Promise<void>((resolve) => (wake = resolve));
    }
  }

  /** One page, with retries: waits on 429 cost no attempt, a 401 moves to the next token. */
  async #fetch(page: number) {
    const o = this.#o;
    let attempt = 0;
    let waits = 0;
    for (;;) {
      o.signal?.throwIfAborted();
      const tokenIndex = this.#token;
      const token = o.tokens[tokenIndex];
      if (token === undefined) {
        throw new LearnerTransferError(
          'LT_NO_TOKEN',
          `every token of the organization was refused (401) while listing learners (page ${page})`,
        );
      }
      const r = await o.client.listLearners(page, token);
      if (r.ok) {
        this.#requests++;
        checkPageAnswered(page, r.page);
        return r.page;
      }
      const code = r.outcome.code;
      if (code === 'unauthorized') {
        // Move past this token once, even when several pages saw the same 401 together.
        if (this.#token === tokenIndex) this.#token++;
        continue;
      }
      if (FATAL.has(code)) {
        throw new LearnerTransferError(
          'LT_INPUT_UNREADABLE',
          `listing learners, page ${page}: the service answered ${code}${
            'status' in r.outcome ? ` (${r.outcome.status})` : ''
          }${'message' in r.outcome && r.outcome.message ? `: ${r.outcome.message}` : ''}`,
        );
      }
      let waitMs: number;
      if (code === 'rate-limited') {
        // The service said when: wait without using an attempt (bounded, so a 429 loop still ends).
        if (++waits > 1000)
          throw new LearnerTransferError('LT_INPUT_UNREADABLE', `page ${page}: 429 without end`);
        // Capped (one day at most): a huge Retry-After neither sleeps for weeks nor overflows the timer.
        waitMs = capDelayMs(r.outcome.retryAfterMs ?? this.#backoff(1));
      } else {
        attempt++;
        if (attempt > o.retries) {
          throw new LearnerTransferError(
            'LT_INPUT_UNREADABLE',
            `listing learners, page ${page}: ${code} after ${attempt} tries (${
              'message' in r.outcome ? r.outcome.message : ''
            }); the crawl cursor keeps the pages done, run the same command again to resume`,
          );
        }
        waitMs = capDelayMs(this.#backoff(attempt));
      }
      o.onRetry?.(page, code, waitMs);
      await sleep(waitMs, undefined, o.signal ? { signal: o.signal } : {});
    }
  }

  /** Exponential backoff with jitter, so several crawls retrying a failing service do not align. */
  #backoff(attempt: number): number {
    const o = this.#o;
    const full = Math.min(o.maxBackoffMs, o.backoffMs * 2 ** (attempt - 1));
    return Math.round(full * (0.5 + Math.random() * 0.5));
  }
}
