// What a crawl is asked to do (filters, skip reasons, options, summary), shared by crawl.ts and
// crawl-pages.ts.
import { createHash } from 'node:crypto';
import type { RedisClient } from '../../redis/client.ts';
import { hasUser, isActiveLearner, type Learner } from '../../api/schemas.ts';
import type { Keys } from '../../core/keys.ts';
import type { CanaryMeta, Runs } from '../../outcomes/runs.ts';
import type { OutcomeStore } from '../../outcomes/store.ts';
import type { OrgIds } from '../org-ids.ts';
import type { ProduceCounts, Producer } from '../producer.ts';
import type { OrgIdEvent, OrgIdSource } from './crawl-org-id.ts';
import type { ListReader, PageRead } from './page-walker.ts';

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

/**
 * Why a learner is not selected, or undefined when it is. The target check comes first; with the
 * target's id not known yet (a --from-org crawl learning it), a learner in the target is 'other-org'.
 */
export function skipReason(
  l: Learner,
  filters: CrawlFilters,
  targetOrgId: number | undefined,
): SkipReason | undefined {
  if (targetOrgId !== undefined && l.organizationId === targetOrgId) return 'in-target';
  if (filters.fromOrgId !== undefined && l.organizationId !== filters.fromOrgId) return 'other-org';
  if (filters.activeOnly && !isActiveLearner(l)) return 'inactive';
  if (filters.withUserOnly && !hasUser(l)) return 'no-user';
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

/**
 * The default crawl id: the same command line resumes the same crawl. A crawl started before the target's
 * id was known has the id of `undefined` (crawlIdOf looks for it too once the id is known).
 */
export function defaultCrawlId(targetOrgId: number | undefined, f: CrawlFilters): string {
  const canon = JSON.stringify([
    targetOrgId ?? null,
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
  /** With `orgIds`: the target's id is learned from the list (or checked against it) as the crawl reads. */
  store?: OutcomeStore | undefined;
  orgIds?: OrgIds | undefined;
}

export interface CrawlProgress {
  pagesDone: number;
  lastPage: number;
  seen: number;
  selected: number;
}

export interface CrawlOptions {
  org: string;
  /** The target's numeric id; may be unknown only with filters.fromOrgId (it is then learned). */
  targetOrgId?: number | undefined;
  /** Where targetOrgId came from (for the message when the list disagrees); default 'remembered'. */
  targetOrgIdSource?: OrgIdSource | undefined;
  /** Hears what the list said of the target's id (learned, confirmed, disagreeing), once. */
  onOrgId?: ((e: OrgIdEvent) => void) | undefined;
  /** Token secrets of the organization (listing uses them, nothing else). */
  tokens: readonly string[];
  filters: CrawlFilters;
  crawlId?: string | undefined;
  /** Start over even when an unfinished crawl with this id exists. */
  restart?: boolean | undefined;
  /** Run id for a new crawl (a resumed crawl keeps its own). */
  runId?: string | undefined;
  /**
   * A canary run (--canary N, docs/canary.md): a new crawl's run is made with it, and the producer given
   * sends its first N learners, the rest waiting for approval. A resumed crawl keeps its run as it is.
   */
  canary?: CanaryMeta | undefined;
  /** Read only: no cursor, no queue, no run; the selected ids are returned for plan. */
  dryRun?: boolean | undefined;
  concurrency?: number | undefined;
  /** Pages read ahead of the one being enqueued (page-walker.ts DEFAULT_READ_AHEAD). */
  readAhead?: number | undefined;
  /** Pages enqueued and committed together at most (page-walker.ts DEFAULT_BATCH_PAGES). */
  batchPages?: number | undefined;
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
  /** The target's id at the end (learned or given); undefined if still unknown. */
  targetOrgId: number | undefined;
}
