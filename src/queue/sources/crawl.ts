// crawl: walks the learner list, selects learners by the filters, skips those in the target, and
// enqueues the rest, resumable from a cursor in Redis (docs/crawl.md). A learner is offered once: an
// in-process Set, the crawl's selected set and job ids drop repeats.
import { LearnerTransferError } from '../../core/errors.ts';
import { newRunId } from '../../outcomes/runs.ts';
import { CrawlCursor, type CursorState } from './crawl-cursor.ts';
import { OrgIdWatch } from './crawl-org-id.ts';
import {
  defaultCrawlId,
  describeFilters,
  type CrawlDeps,
  type CrawlOptions,
  type CrawlSummary,
} from './crawl-options.ts';
import { limitReached, PageBatches, tallyFrom, type CrawlRun, type CrawlTally } from './crawl-pages.ts';
import { PageWalker, type OnPages, type WalkResult } from './page-walker.ts';

export * from './crawl-options.ts';

export async function crawl(deps: CrawlDeps, options: CrawlOptions): Promise<CrawlSummary> {
  const { filters } = options;
  if (options.targetOrgId === undefined && filters.fromOrgId === undefined) {
    throw new LearnerTransferError(
      'LT_USAGE',
      `crawl of ${options.org}: the target's organization id is needed to skip learners already in it; ` +
        `give --target-org-id N, or --from-org N (the id is then learned from the list)`,
    );
  }
  const dry = Boolean(options.dryRun);
  const crawlId = options.crawlId ?? (await crawlIdOf(deps, options, dry));
  const cursor = dry ? undefined : new CrawlCursor(deps.redis, deps.keys, options.org, crawlId);
  const { state, resumedAt, runId } = await resumeOrStart(deps, options, crawlId, cursor);
  const tally = tallyFrom(state);
  const watch =
    deps.store && deps.orgIds
      ? new OrgIdWatch({
          org: options.org,
          known:
            options.targetOrgId === undefined
              ? undefined
              : { id: options.targetOrgId, source: options.targetOrgIdSource ?? 'remembered' },
          store: deps.store,
          orgIds: deps.orgIds,
          dryRun: dry,
          onEvent: options.onOrgId,
        })
      : undefined;
  const run: CrawlRun = { deps, options, cursor, runId, dry, watch };
  const batches = new PageBatches(run, tally);
  const onPages: OnPages = (reads) => batches.handle(reads);

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
    result = await walkFrom(run, state, tally, crawlId, onPages, batches);
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
    claimedElsewhere: counts.claimedElsewhere,
    moved: counts.moved,
    awaitingApproval: counts.awaitingApproval,
    targetOrgId: watch?.id ?? options.targetOrgId,
  };
  if (dry) summary.selectedIds = tally.selectedIds;
  return summary;
}

/**
 * The default crawl id of these options. Once the target's id is known, a crawl started before it was
 * (the id of `undefined`) and still running is the one to resume.
 */
async function crawlIdOf(deps: CrawlDeps, options: CrawlOptions, dry: boolean): Promise<string> {
  const id = defaultCrawlId(options.targetOrgId, options.filters);
  if (options.targetOrgId === undefined || dry) return id;
  const before = defaultCrawlId(undefined, options.filters);
  const status = await deps.redis.hget(deps.keys.crawlCursor(options.org, before), 'status');
  return status === 'running' ? before : id;
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
  if (state && state.status === 'running' && !sameFilters(state.filters, filtersJson)) {
    throw new LearnerTransferError(
      'LT_USAGE',
      `crawl '${crawlId}' of ${options.org} is unfinished with other filters (${state.filters}); ` +
        `give the same filters to resume it, or --restart to start over`,
    );
  }
  if (state?.status === 'done') state = undefined;
  if (state) await requireSameCanary(deps, options, crawlId, state.runId);
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
        ...(options.canary ? { canary: options.canary } : {}),
      });
    }
  }
  return { state, resumedAt, runId };
}

/**
 * A resumed crawl goes on in its run, so it keeps that run's canary: --canary on a crawl started without
 * it would leave learners awaiting approval in a run `approve` refuses (not a canary run), and a canary
 * crawl resumed without --canary would send the rest unapproved. Both are refused, naming the flag.
 */
async function requireSameCanary(
  deps: CrawlDeps,
  options: CrawlOptions,
  crawlId: string,
  runId: string,
): Promise<void> {
  const had = (await deps.runs.get(runId))?.canary?.size;
  const given = options.canary?.size;
  if (had === given) return;
  const was = had === undefined ? 'without --canary' : `with --canary ${had}`;
  const resume = had === undefined ? 'leave out --canary' : `give --canary ${had}`;
  throw new LearnerTransferError(
    'LT_USAGE',
    `crawl '${crawlId}' of ${options.org} is unfinished in run ${runId}, started ${was}: ` +
      `to resume it, ${resume}; or --restart to start over`,
  );
}

/**
 * The filters a crawl was started with against today's. The target's id counts only when the crawl
 * started with one: a crawl that started without it (--from-org) may have learned it since, but a crawl
 * started for one id does not go on for another.
 */
function sameFilters(storedJson: string, givenJson: string): boolean {
  const parse = (json: string) => {
    try {
      return JSON.parse(json) as Record<string, unknown>;
    } catch {
      return undefined;
    }
  };
  const stored = parse(storedJson);
  const given = parse(givenJson);
  if (!stored || !given) return storedJson === givenJson;
  const canon = (f: Record<string, unknown>, withId: boolean) => {
    const { targetOrgId: id, ...rest } = f;
    const entries = Object.entries(withId ? { ...rest, targetOrgId: id } : rest);
    return JSON.stringify(entries.sort(([a], [b]) => a.localeCompare(b)));
  };
  const withId = stored.targetOrgId !== undefined && stored.targetOrgId !== null;
  return canon(stored, withId) === canon(given, withId);
}

/** Walks the list from the cursor's page; a list the walk cannot believe says what was kept. */
async function walkFrom(
  run: CrawlRun,
  state: CursorState | undefined,
  tally: CrawlTally,
  crawlId: string,
  onPages: OnPages,
  batches: PageBatches,
): Promise<WalkResult> {
  const { deps, options } = run;
  const walker = new PageWalker({
    client: deps.client,
    tokens: options.tokens,
    concurrency: options.concurrency,
    readAhead: options.readAhead,
    batchPages: options.batchPages,
    retries: options.retries,
    backoffMs: options.backoffMs,
    maxPages: options.maxPages,
    startPage: state?.next ?? 1,
    history: state?.marks,
    signal: options.signal,
    onPages,
    onRetry: options.onRetry,
  });
  try {
    const result = await walker.walk();
    await batches.drain();
    return result;
  } catch (err) {
    // Batches on their way are committed (or fail) before the error goes up: the cursor is then final.
    await batches.settle();
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
