// The crawl's handling of the pages the walker hands on: each learner decided on first sight, the
// selected ones enqueued in one batch, and the pages committed after it, in page order (docs/crawl.md,
// "Read ahead").
import type { Learner } from '../../api/schemas.ts';
import type { Bucket } from '../../outcomes/record.ts';
import { addCounts, emptyCounts, type ProduceCounts } from '../producer.ts';
import type { CrawlCursor, CursorCounter, CursorState } from './crawl-cursor.ts';
import type { OrgIdWatch } from './crawl-org-id.ts';
import {
  SKIP_REASONS,
  skipReason,
  type CrawlDeps,
  type CrawlFilters,
  type CrawlOptions,
  type SkipReason,
} from './crawl-options.ts';
import type { PageRead } from './page-walker.ts';

/** Batches enqueued at once: enough to keep Redis and this process both busy. */
export const MAX_BATCHES_IN_FLIGHT = 2;

/** One crawl's fixed parts, shared by the handling of each page. */
export interface CrawlRun {
  deps: CrawlDeps;
  options: CrawlOptions;
  /** Undefined on a dry run: nothing is written. */
  cursor: CrawlCursor | undefined;
  runId: string;
  dry: boolean;
  /** Learns (or checks) the target's id from the pages; undefined without a store and OrgIds. */
  watch: OrgIdWatch | undefined;
}

/** What the crawl has counted so far, from the cursor's counters on a resume. */
export interface CrawlTally {
  counts: ProduceCounts;
  skipped: Record<SkipReason, number>;
  seen: number;
  selected: number;
  pagesDone: number;
  lastPage: number;
  /** Learners met in this process: a learner is decided on its first sight. */
  firstSight: Set<number>;
  /** Dry run: the learners selected, in list order. */
  selectedIds: number[];
}

export function tallyFrom(state: CursorState | undefined): CrawlTally {
  const counts = emptyCounts();
  const skipped = Object.fromEntries(SKIP_REASONS.map((r) => [r, state?.skipped[r] ?? 0])) as Record<
    SkipReason,
    number
  >;
  counts.enqueued = state?.counters.enqueued ?? 0;
  counts.alreadyQueued = state?.counters.alreadyQueued ?? 0;
  for (const [b, n] of Object.entries(state?.done ?? {})) counts.alreadyDone[b as Bucket] = n;
  return {
    counts,
    skipped,
    seen: state?.counters.seen ?? 0,
    selected: state?.counters.selected ?? 0,
    pagesDone: state ? state.next - 1 : 0,
    lastPage: 0,
    firstSight: new Set<number>(),
    selectedIds: [],
  };
}

export function limitReached(filters: CrawlFilters, tally: CrawlTally): boolean {
  return filters.limit !== undefined && tally.selected >= filters.limit;
}

/** The learners of a page met for the first time: those the filters skip (by reason), and the rest. */
function sortPage(
  read: PageRead,
  tally: CrawlTally,
  options: CrawlOptions,
  targetOrgId: number | undefined,
): SortedPage {
  const skipped: Record<string, number> = {};
  let seen = 0;
  const candidates: Learner[] = [];
  for (const l of read.learners) {
    if (tally.firstSight.has(l.id)) continue;
    tally.firstSight.add(l.id);
    seen++;
    const reason = skipReason(l, options.filters, targetOrgId);
    if (reason) skipped[reason] = (skipped[reason] ?? 0) + 1;
    else candidates.push(l);
  }
  return { read, seen, skipped, candidates, chosen: [] };
}

interface SortedPage {
  read: PageRead;
  seen: number;
  skipped: Record<string, number>;
  candidates: Learner[];
  /** The candidates selected (none selected before a kill, none past --limit). */
  chosen: number[];
}

/** A batch selected and on its way to the queue, then to the cursor. */
interface Batch {
  pages: SortedPage[];
  chosen: number[];
  seen: number;
  skipped: Record<string, number>;
}

/**
 * Pages handed on together, in order: their new candidates selected at once (so --limit counts exactly,
 * whatever is still on its way), enqueued in one batch, then committed in page order (see the top of
 * this file). Once --limit is reached, the pages after the one that reached it are left unhandled.
 */
export class PageBatches {
  readonly #run: CrawlRun;
  readonly #tally: CrawlTally;
  /** The last commit: each commit waits for the one before it. */
  #chain: Promise<void> = Promise.resolve();
  /** Commits not settled yet, oldest first. */
  readonly #pending: Promise<void>[] = [];
  #failed: { err: unknown } | undefined;

  constructor(run: CrawlRun, tally: CrawlTally) {
    this.#run = run;
    this.#tally = tally;
  }

  async handle(reads: readonly PageRead[]): Promise<'stop' | number | void> {
    this.#throwIfFailed();
    const { deps, options, dry, runId } = this.#run;
    const tally = this.#tally;
    const batch = await this.#select(reads);
    const taken = batch.pages.length;
    tally.seen += batch.seen;
    tally.selected += batch.chosen.length;
    for (const [r, n] of Object.entries(batch.skipped)) tally.skipped[r as SkipReason] += n;
    if (dry) tally.selectedIds.push(...batch.chosen);
    // Where the list shows each learner now: the organization `report --reverse` would move it back to.
    const shown = new Map(batch.pages.flatMap((p) => p.candidates.map((l) => [l.id, l.organizationId])));
    const items = batch.pages.flatMap((p) =>
      p.chosen.map((learnerId) => ({
        org: options.org,
        learnerId,
        source: `crawl:page ${p.read.page}`,
        previousOrgId: shown.get(learnerId),
      })),
    );
    // Started now, while the batches before it may still be on their way: only the commits wait.
    const added = !dry && items.length > 0 ? deps.producer.add(items, runId) : Promise.resolve(emptyCounts());
    const before = this.#chain;
    const commit = Promise.all([before, added]).then(([, counts]) => this.#commit(batch, counts));
    this.#chain = commit;
    // Settled once its commit and its add are both over: a commit skipped for a failure before it must
    // not leave its add writing after the crawl has returned.
    const settled = Promise.allSettled([commit, added]).then(([c]) => {
      if (c.status === 'rejected') this.#failed ??= { err: c.reason };
    });
    this.#pending.push(settled);
    while (this.#pending.length >= MAX_BATCHES_IN_FLIGHT) await this.#pending.shift();
    this.#throwIfFailed();
    if (limitReached(options.filters, tally)) return taken < reads.length ? taken : 'stop';
  }

  /** Waits for every batch to be committed; throws the first that failed. */
  async drain(): Promise<void> {
    await Promise.all(this.#pending);
    this.#throwIfFailed();
  }

  /** Waits for the batches on their way, whatever became of them (the walk failed: its error wins). */
  async settle(): Promise<void> {
    await Promise.all(this.#pending);
  }

  #throwIfFailed(): void {
    if (this.#failed) throw this.#failed.err;
  }

  /** The pages sorted, and their new candidates chosen, up to --limit. */
  async #select(reads: readonly PageRead[]): Promise<Batch> {
    const { options, cursor, watch } = this.#run;
    const tally = this.#tally;
    const limit = options.filters.limit;
    // The target's id first: the in-target check below uses it once it is learned.
    await watch?.observe(reads.flatMap((r) => r.learners));
    const target = watch?.id ?? options.targetOrgId;
    const pages = reads.map((read) => sortPage(read, tally, options, target));
    const all = pages.flatMap((p) => p.candidates.map((l) => l.id));
    const before = cursor ? await cursor.selectedBefore(all) : new Set<number>();
    let room = limit === undefined ? Infinity : Math.max(0, limit - tally.selected);
    let taken = 0;
    for (const p of pages) {
      p.chosen = p.candidates
        .filter((l) => !before.has(l.id))
        .map((l) => l.id)
        .slice(0, room);
      room -= p.chosen.length;
      taken++;
      if (room === 0) break;
    }
    const handled = pages.slice(0, taken);
    const skipped: Record<string, number> = {};
    for (const p of handled)
      for (const [r, n] of Object.entries(p.skipped)) skipped[r] = (skipped[r] ?? 0) + n;
    return {
      pages: handled,
      chosen: handled.flatMap((p) => p.chosen),
      seen: handled.reduce((n, p) => n + p.seen, 0),
      skipped,
    };
  }

  /** The batch's pages committed to the cursor in one step, after its learners are in the queue. */
  async #commit(batch: Batch, counts: ProduceCounts): Promise<void> {
    const { cursor, options } = this.#run;
    const tally = this.#tally;
    const last = (batch.pages.at(-1) as SortedPage).read;
    const delta: Partial<Record<CursorCounter, number>> = {
      seen: batch.seen,
      selected: batch.chosen.length,
      enqueued: counts.enqueued,
      alreadyQueued: counts.alreadyQueued,
    };
    await cursor?.commitPage({
      page: last.page,
      marks: last.marks,
      next: last.pass === 1 ? last.page + 1 : undefined,
      selected: batch.chosen,
      counters: delta,
      skipped: batch.skipped,
      done: counts.alreadyDone,
    });
    addCounts(tally.counts, counts);
    tally.lastPage = last.lastPage;
    if (last.pass === 1) tally.pagesDone = last.page;
    const { pagesDone, lastPage, seen, selected } = tally;
    options.onProgress?.({ pagesDone, lastPage, seen, selected });
    for (const p of batch.pages) await options.onPage?.(p.read);
  }
}
