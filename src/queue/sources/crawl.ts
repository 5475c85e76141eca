// crawl: finds the learners to move without a file. Walks the learner list (page-walker.ts), selects
// learners by the filters, skips those already in the target organization, and enqueues the rest
// through the producer (same dedupe and run records as a CSV), with a cursor in Redis so a crawl
// stopped at page 400 of 1,000 resumes at 400.
//
// Without losing or doubling: the walker re-reads pages the list changed under (see page-walker.ts);
// a learner is decided on its first sight and never offered twice: an in-process Set drops repeats
// within a run, the crawl's selected set in Redis drops them across a kill, and job ids drop anything
// left. A --limit counts selected learners exactly, across resumes.
import { createHash } from 'node:crypto';
import type { RedisClient } from '../../redis/client.ts';
import type { Learner } from '../../api/schemas.ts';
import { LearnerTransferError } from '../../core/errors.ts';
import type { Keys } from '../../core/keys.ts';
import type { Bucket } from '../../outcomes/record.ts';
import type { Runs } from '../../outcomes/runs.ts';
import { newRunId } from '../../outcomes/runs.ts';
import { addCounts, emptyCounts, type ProduceCounts, type Producer } from '../producer.ts';
import { CrawlCursor, type CursorCounter, type CursorState } from './crawl-cursor.ts';
import { PageWalker, type ListReader, type PageRead, type WalkResult } from './page-walker.ts';

export interface CrawlFilters {
  /** Only learners of this organization id. */
  fromOrgId?: number | undefined;
  activeOnly?: boolean | undefined;
  /** The spec: transfers are meant for learners created with a user attached. */
  withUserOnly?: boolean | undefined;
  /** Stop after this many learners are selected. */
  limit?: number | undefined;
}

export const SKIP_REASONS = ['in-target', 'other-org', 'inactive', 'no-user'] as const;
export type SkipReason = (typeof SKIP_REASONS)[number];

/** Why a learner is not selected, or undefined when it is. The target check comes first. */
export function skipReason(l: Learner, filters: CrawlFilters, targetOrgId: number): SkipReason | undefined {
  if (l.organizationId === targetOrgId) return 'in-target';
  if (filters.fromOrgId !== undefined && l.organizationId !== filters.fromOrgId) return 'other-org';
  // The spec shows isActive 1 for active; other values are not shown, so only 1 counts as active.
  if (filters.activeOnly && l.isActive !== 1) return 'inactive';
  if (filters.withUserOnly && (l.userId === null || l.userId === undefined || l.userId === ''))
    return 'no-user';
  return undefined;
}

export function describeFilters(f: CrawlFilters): string {
  const parts: string[] = [];
  if (f.fromOrgId !== undefined) parts.push(`from org ${f.fromOrgId}`);
  if (f.activeOnly) parts.push('active only');
  if (f.withUserOnly) parts.push('with user only');
  if (f.limit !== undefined) parts.push(`limit ${f.limit}`);
  return parts.join(', ') || 'no filters';
}

/** The default crawl id: the same command line resumes the same crawl. */
export function defaultCrawlId(targetOrgId: number, f: CrawlFilters): string {
  const canon = JSON.stringify([
    targetOrgId,
    f.fromOrgId ?? null,
    !!f.activeOnly,
    !!f.withUserOnly,
    f.limit ?? null,
  ]);
  return `c${createHash('sha256').update(canon).digest('hex').slice(0, 10)}`;
}

export interface CrawlDeps {
  redis: RedisClient;
  keys: Keys;
  producer: Producer;
  runs: Runs;
  client: ListReader;
}

export interface CrawlProgress {
  pagesDone: number;
  lastPage: number;
  seen: number;
  selected: number;
}

export interface CrawlOptions {
  org: string;
  targetOrgId: number;
  /** Token secrets of the organization (listing uses them, nothing else). */
  tokens: readonly string[];
  filters: CrawlFilters;
  crawlId?: string | undefined;
  /** Start over even when an unfinished crawl with this id exists. */
  restart?: boolean | undefined;
  /** Run id for a new crawl (a resumed crawl keeps its own). */
  runId?: string | undefined;
  /** Read only: no cursor, no queue, no run; the selected ids are returned for plan. */
  dryRun?: boolean | undefined;
  concurrency?: number | undefined;
  retries?: number | undefined;
  backoffMs?: number | undefined;
  /** Most pages the list may claim (CRAWL_MAX_PAGES; default config.ts DEFAULT_CRAWL_MAX_PAGES). */
  maxPages?: number | undefined;
  signal?: AbortSignal | undefined;
  onProgress?: (p: CrawlProgress) => void;
  /** Called after each page is handled (and committed), for progress lines and tests. */
  onPage?: (read: PageRead) => Promise<void> | void;
  onRetry?: (page: number, code: string, waitMs: number) => void;
}

export interface CrawlSummary extends ProduceCounts {
  crawlId: string;
  runId: string;
  /** The page a resumed crawl started at, or null for a fresh one. */
  resumedAt: number | null;
  lastPage: number;
  total: number;
  requests: number;
  rereads: number;
  /** Learners read (first sight in this process; re-reads after a resume may count again). */
  seen: number;
  selected: number;
  skipped: Record<SkipReason, number>;
  stoppedByLimit: boolean;
  unsettledPages: number[];
  /** Dry run only: the learners that would be enqueued, in list order. */
  selectedIds?: number[];
}

export async function crawl(deps: CrawlDeps, options: CrawlOptions): Promise<CrawlSummary> {
  const { filters } = options;
  const crawlId = options.crawlId ?? defaultCrawlId(options.targetOrgId, filters);
  const dry = Boolean(options.dryRun);
  const cursor = dry ? undefined : new CrawlCursor(deps.redis, deps.keys, options.org, crawlId);
  const { state, resumedAt, runId } = await resumeOrStart(deps, options, crawlId, cursor);
  const tally = tallyFrom(state);
  const run: CrawlRun = { deps, options, cursor, runId, dry };
  const onPage = (read: PageRead) => handlePage(run, tally, read);

  let result: WalkResult;
  if (limitReached(filters, tally)) {
    result = {
      requests: 0,
      pass1Pages: 0,
      rereads: 0,
      passes: 0,
      lastPage: 0,
      total: 0,
      stopped: true,
      unsettledPages: [],
    };
  } else {
    result = await walkFrom(run, state, tally, crawlId, onPage);
  }
  await cursor?.finish();
  const { counts } = tally;
  const summary: CrawlSummary = {
    crawlId,
    runId,
    resumedAt,
    lastPage: result.lastPage || tally.lastPage,
    total: result.total,
    requests: result.requests,
    rereads: result.rereads,
    seen: tally.seen,
    selected: tally.selected,
    skipped: tally.skipped,
    stoppedByLimit: result.stopped,
    unsettledPages: result.unsettledPages,
    enqueued: counts.enqueued,
    alreadyQueued: counts.alreadyQueued,
    alreadyDone: counts.alreadyDone,
    heldElsewhere: counts.heldElsewhere,
    moved: counts.moved,
  };
  if (dry) summary.selectedIds = tally.selectedIds;
  return summary;
}

/** One crawl's fixed parts, shared by the handling of each page. */
interface CrawlRun {
  deps: CrawlDeps;
  options: CrawlOptions;
  /** Undefined on a dry run: nothing is written. */
  cursor: CrawlCursor | undefined;
  runId: string;
  dry: boolean;
}

/** What the crawl has counted so far, from the cursor's counters on a resume. */
interface CrawlTally {
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

/**
 * The unfinished crawl of this id, when there is one and no --restart (refused when its filters differ),
 * or a new one: its cursor started and its run created.
 */
async function resumeOrStart(
  deps: CrawlDeps,
  options: CrawlOptions,
  crawlId: string,
  cursor: CrawlCursor | undefined,
): Promise<{ state: CursorState | undefined; resumedAt: number | null; runId: string }> {
  const filtersJson = JSON.stringify({ targetOrgId: options.targetOrgId, ...options.filters });
  let state = cursor && !options.restart ? await cursor.load() : undefined;
  if (state && state.status === 'running' && state.filters !== filtersJson) {
    throw new LearnerTransferError(
      'LT_USAGE',
      `crawl '${crawlId}' of ${options.org} is unfinished with other filters (${state.filters}); ` +
        `give the same filters to resume it, or --restart to start over`,
    );
  }
  if (state?.status === 'done') state = undefined;
  const resumedAt = state && state.next > 1 ? state.next : null;
  const runId = state?.runId ?? options.runId ?? newRunId();
  if (cursor && !state) {
    await cursor.start(runId, filtersJson);
    if (!(await deps.runs.get(runId))) {
      await deps.runs.create({
        id: runId,
        kind: 'crawl',
        source: `crawl ${options.org} (${describeFilters(options.filters)})`,
        orgs: [options.org],
      });
    }
  }
  return { state, resumedAt, runId };
}

function tallyFrom(state: CursorState | undefined): CrawlTally {
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

function limitReached(filters: CrawlFilters, tally: CrawlTally): boolean {
  return filters.limit !== undefined && tally.selected >= filters.limit;
}

/** Walks the list from the cursor's page; a list the walk cannot believe says what was kept. */
async function walkFrom(
  run: CrawlRun,
  state: CursorState | undefined,
  tally: CrawlTally,
  crawlId: string,
  onPage: (read: PageRead) => Promise<'stop' | void>,
): Promise<WalkResult> {
  const { deps, options } = run;
  const walker = new PageWalker({
    client: deps.client,
    tokens: options.tokens,
    concurrency: options.concurrency,
    retries: options.retries,
    backoffMs: options.backoffMs,
    maxPages: options.maxPages,
    startPage: state?.next ?? 1,
    history: state?.marks,
    signal: options.signal,
    onPage,
    onRetry: options.onRetry,
  });
  try {
    return await walker.walk();
  } catch (err) {
    // A list the walk cannot believe (page-walker.ts): what was handled stays enqueued and in the
    // cursor, and the message says so.
    if (err instanceof LearnerTransferError && err.code === 'LT_INPUT_UNREADABLE' && !run.dry) {
      const { pagesDone } = tally;
      const { enqueued } = tally.counts;
      throw new LearnerTransferError(
        err.code,
        `${err.message} (crawl '${crawlId}': ${pagesDone} page${pagesDone === 1 ? '' : 's'} handled, ` +
          `${enqueued} learner${enqueued === 1 ? '' : 's'} enqueued and kept; ` +
          `the same command resumes at page ${pagesDone + 1})`,
        { cause: err },
      );
    }
    throw err;
  }
}

/** The learners of a page met for the first time: those the filters skip (by reason), and the rest. */
function sortPage(
  read: PageRead,
  tally: CrawlTally,
  options: CrawlOptions,
): { pageSeen: number; pageSkipped: Record<string, number>; candidates: Learner[] } {
  const pageSkipped: Record<string, number> = {};
  let pageSeen = 0;
  const candidates: Learner[] = [];
  for (const l of read.learners) {
    if (tally.firstSight.has(l.id)) continue;
    tally.firstSight.add(l.id);
    pageSeen++;
    const reason = skipReason(l, options.filters, options.targetOrgId);
    if (reason) pageSkipped[reason] = (pageSkipped[reason] ?? 0) + 1;
    else candidates.push(l);
  }
  return { pageSeen, pageSkipped, candidates };
}

/**
 * One page: its new candidates (none selected before a kill, none past --limit) enqueued, then the
 * page committed to the cursor with its counts, then counted here. 'stop' once --limit is reached.
 */
async function handlePage(run: CrawlRun, tally: CrawlTally, read: PageRead): Promise<'stop' | void> {
  const { deps, options, cursor, runId, dry } = run;
  const limit = options.filters.limit;
  tally.lastPage = read.lastPage;
  const { pageSeen, pageSkipped, candidates } = sortPage(read, tally, options);
  const before = cursor ? await cursor.selectedBefore(candidates.map((l) => l.id)) : new Set<number>();
  let chosen = candidates.filter((l) => !before.has(l.id)).map((l) => l.id);
  if (limit !== undefined) chosen = chosen.slice(0, Math.max(0, limit - tally.selected));
  const pageCounts = emptyCounts();
  if (!dry && chosen.length > 0) {
    addCounts(
      pageCounts,
      await deps.producer.add(
        chosen.map((learnerId) => ({ org: options.org, learnerId, source: `crawl:page ${read.page}` })),
        runId,
      ),
    );
  }
  if (dry) tally.selectedIds.push(...chosen);
  const delta: Partial<Record<CursorCounter, number>> = {
    seen: pageSeen,
    selected: chosen.length,
    enqueued: pageCounts.enqueued,
    alreadyQueued: pageCounts.alreadyQueued,
  };
  await cursor?.commitPage({
    page: read.page,
    marks: read.marks,
    next: read.pass === 1 ? read.page + 1 : undefined,
    selected: chosen,
    counters: delta,
    skipped: pageSkipped,
    done: pageCounts.alreadyDone,
  });
  addCounts(tally.counts, pageCounts);
  for (const [r, n] of Object.entries(pageSkipped)) tally.skipped[r as SkipReason] += n;
  tally.seen += pageSeen;
  tally.selected += chosen.length;
  if (read.pass === 1) tally.pagesDone = read.page;
  const { pagesDone, lastPage, seen, selected } = tally;
  options.onProgress?.({ pagesDone, lastPage, seen, selected });
  await options.onPage?.(read);
  if (limitReached(options.filters, tally)) return 'stop';
}
