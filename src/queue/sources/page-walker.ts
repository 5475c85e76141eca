// Walks GET /1/learner page by page: bounded concurrency, pages handed on in order, retries with
// backoff, and re-reads of the pages read before the list's total changed, so a list changing under
// the walk loses nobody (docs/crawl.md, "Why pages are read again").
import { setTimeout as sleep } from 'node:timers/promises';
import { capDelayMs } from '../../api/retry-after.ts';
import type { ListResult } from '../../api/client.ts';
import type { Learner } from '../../api/schemas.ts';
import { DEFAULT_CRAWL_MAX_PAGES } from '../../core/config.ts';
import { LearnerTransferError } from '../../core/errors.ts';
import { OUTCOMES } from '../../outcomes/codes.ts';
import { emptyMarks, encodeMarks, suspectPages, type WalkMarks } from './page-marks.ts';
import { checkPageAnswered, checkPageClaims } from './page-checks.ts';

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
  /** The walker's marks with this read counted (page-marks.ts encodeMarks), for a cursor to keep. */
  marks: string;
}

export type OnPage = (read: PageRead) => Promise<'stop' | void> | 'stop' | void;
export type OnPages = (
  reads: readonly PageRead[],
) => Promise<'stop' | number | void> | 'stop' | number | void;

/** Pages read ahead of the one being handled, by default. */
export const DEFAULT_READ_AHEAD = 32;
/** Pages handed to onPages at once, by default. */
export const DEFAULT_BATCH_PAGES = 16;

export interface WalkOptions {
  client: ListReader;
  /** Token secrets that may list; a 401 moves on to the next, until none is left. */
  tokens: readonly string[];
  concurrency?: number | undefined;
  /**
   * Most pages read and not yet handed on (default DEFAULT_READ_AHEAD, at least `concurrency`): while
   * the handler enqueues a page's learners, the pages after it are read. Bounds memory, and (with the
   * handler's own batches on their way, crawl-pages.ts) what a killed crawl read without committing.
   */
  readAhead?: number | undefined;
  /**
   * Most pages handed on at once to `onPages` (default DEFAULT_BATCH_PAGES): the pages read ahead and
   * ready, in order, so their learners go to Redis in one batch and their cursor in one commit.
   */
  batchPages?: number | undefined;
  /** Attempts after the first for server errors, network errors and bad bodies (default 5). */
  retries?: number | undefined;
  backoffMs?: number | undefined;
  maxBackoffMs?: number | undefined;
  /** Pass-1 start (a resumed crawl); pages before it are known through `history`. */
  startPage?: number | undefined;
  /** The marks of the pages already handled (a resumed crawl); not changed. */
  history?: WalkMarks | undefined;
  /** Most passes in all (default 4): a list that never stops changing must still end. */
  maxPasses?: number | undefined;
  /**
   * Most pages the list may claim (default DEFAULT_CRAWL_MAX_PAGES; CRAWL_MAX_PAGES): a response claiming
   * more stops the walk before any page past the cap is asked for. Re-reads stay within `maxPasses`
   * times it.
   */
  maxPages?: number | undefined;
  signal?: AbortSignal | undefined;
  /** Hears each page in order; or `onPages`, the ready pages in order, a few at a time. */
  onPage?: OnPage | undefined;
  /**
   * Pages handed on together (consecutive, in order, up to `batchPages`). Returns 'stop' to end the walk,
   * or a number: the handler stopped after that many of them (the rest are not handled).
   */
  onPages?: OnPages | undefined;
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

export class PageWalker {
  readonly #o: {
    [K in keyof Omit<WalkOptions, 'signal' | 'onRetry' | 'history' | 'onPage' | 'onPages'>]-?: Exclude<
      WalkOptions[K],
      undefined
    >;
  } & Pick<WalkOptions, 'signal' | 'onRetry'>;
  readonly #onPages: OnPages;
  /** Ranges and counters only (page-marks.ts): its size does not grow with the pages read. */
  readonly #marks: WalkMarks;
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
    const concurrency = given.concurrency ?? 4;
    this.#o = {
      concurrency,
      readAhead: Math.max(concurrency, given.readAhead ?? DEFAULT_READ_AHEAD),
      batchPages: options.onPages ? (given.batchPages ?? DEFAULT_BATCH_PAGES) : 1,
      retries: 5,
      backoffMs: 500,
      maxBackoffMs: 30_000,
      startPage: 1,
      maxPasses: 4,
      maxPages: DEFAULT_CRAWL_MAX_PAGES,
      ...given,
    };
    const { onPage, onPages } = options;
    if (!onPages && !onPage) throw new TypeError('PageWalker: onPage or onPages is required');
    this.#onPages = onPages ?? ((reads) => onPage?.(reads[0] as PageRead));
    const h = options.history;
    this.#marks = h ? { ...h, read: h.read.copy(), fresh: h.fresh.copy() } : emptyMarks();
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

    let suspects = stopped ? [] : suspectPages(this.#marks, lastPage);
    while (!stopped && suspects.length > 0 && pass < o.maxPasses) {
      pass++;
      const list = suspects;
      let i = 0;
      const r = await this.#run(pass, onRead, () => list[i++]);
      rereads += r.handled;
      stopped = r.stopped;
      suspects = stopped ? [] : suspectPages(this.#marks, lastPage);
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

  /**
   * A response arrived (arrival order): a total other than the one before it is a change of the list,
   * after every read handled so far, so every page read becomes a suspect.
   */
  #arrived(total: number): number {
    const m = this.#marks;
    const seq = ++m.seq;
    if (m.lastTotal !== null && total !== m.lastTotal) {
      m.lastChange = seq;
      m.fresh.clear();
    }
    m.lastTotal = total;
    return seq;
  }

  /** A read is handled: its page is read, and fresh unless a change arrived after it. */
  #handled(read: PageRead): void {
    const m = this.#marks;
    m.read.add(read.page);
    if (read.seq >= m.lastChange) m.fresh.add(read.page);
    else m.fresh.delete(read.page);
    read.marks = encodeMarks(m);
  }

  /**
   * Reads the pages `nextPage()` names (undefined: none for now), `concurrency` at a time, and hands
   * them to onPage strictly in the order they were named. A page that fails stops the launches; the
   * pages named before it are still handed on (read ahead, they may fail or arrive after it), so a
   * cursor stands right before the page that failed.
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
    /** The earliest failure (by the order pages were named): pages before it are still handed on. */
    let failure: { err: unknown; index: number } | undefined;
    let wake: (() => void) | undefined;

    const launch = () => {
      // At most `concurrency` requests at once, and at most `readAhead` pages past the one being
      // handled: memory stays bounded (what a killed crawl read and did not commit adds the handler's
      // batches still on their way).
      while (!stopped && !failure && inFlight < o.concurrency && launched - next < o.readAhead) {
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
              seq: this.#arrived(body.pagination.total),
              marks: '',
            };
            onRead(read);
            results.set(index, read);
          })
          .catch((err: unknown) => {
            if (!failure || index < failure.index) failure = { err, index };
          })
          .finally(() => {
            inFlight--;
            // Keep reading ahead while the handler is busy with the pages before (a read-ahead refilled
            // only between handlings would read no more than `concurrency` pages per handling).
            launch();
            wake?.();
          });
      }
    };
    const settle = async () => {
      while (inFlight > 0) await new Promise<void>((resolve) => (wake = resolve));
    };

    for (;;) {
      launch();
      for (;;) {
        const batch = this.#ready(results, next, failure?.index ?? Infinity);
        if (stopped || batch.length === 0) break;
        // An abort stops handing pages on at once; the cursor has every page handled so far.
        if (o.signal?.aborted) {
          failure = { err: o.signal.reason, index: next };
          break;
        }
        for (const r of batch) this.#handled(r);
        const answer = await this.#onPages(batch);
        // A number: the handler stopped after that many pages (a --limit reached inside the batch).
        const taken = typeof answer === 'number' ? answer : batch.length;
        if (answer === 'stop' || typeof answer === 'number') stopped = true;
        handled += taken;
        for (let i = 0; i < batch.length; i++) results.delete(next + i);
        next += batch.length;
        if (!stopped) launch();
      }
      // Pages named before the failure that are still in flight are waited for (below), then handed on.
      if (failure && (next >= failure.index || (inFlight === 0 && !results.has(next)))) {
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

  /** The pages ready in order from `next`, before `end` (a failure), up to batchPages. */
  #ready(results: ReadonlyMap<number, PageRead>, next: number, end: number): PageRead[] {
    const batch: PageRead[] = [];
    let read: PageRead | undefined;
    while (
      batch.length < this.#o.batchPages &&
      next + batch.length < end &&
      (read = results.get(next + batch.length)) !== undefined
    )
      batch.push(read);
    return batch;
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
        checkPageClaims(page, r.page, o.maxPages);
        return r.page;
      }
      const code = r.outcome.code;
      if (code === 'unauthorized') {
        // Move past this token once, even when several pages saw the same 401 together.
        if (this.#token === tokenIndex) this.#token++;
        continue;
      }
      // Errors that retrying cannot help on a list read (the outcome table says which).
      if (OUTCOMES[code].crawlStops) {
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
