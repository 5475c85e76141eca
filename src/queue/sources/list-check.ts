// The pre-flight's read of the learner list: one walk over GET /1/learner through the crawl's page walker
// (same concurrency, retries, re-reads of pages the list changed under), keeping only what the check
// needs of the learners it was asked about. It takes no limiter permit: the spec limits transfers, not
// the list, and a check must not spend the budget it is there to save.
//
// Not resumable: the snapshot lives in this process only (a killed check reads the list again). Kept
// small: one entry per learner asked about, not per learner listed.
import type { Learner } from '../../api/schemas.ts';
import { PageWalker, type ListReader } from './page-walker.ts';

/** The classes of `plan --check`, in the order they are decided. */
export const CHECK_CLASSES = ['will-transfer', 'in-target', 'unknown', 'no-user', 'inactive'] as const;
export type CheckClass = (typeof CHECK_CLASSES)[number];

/** What the list said of one learner asked about. */
export interface ListedLearner {
  organizationId: number;
  hasUser: boolean;
  active: boolean;
}

export interface ListSnapshot {
  /** Learners asked about that the list holds (the others are unknown to it). */
  found: Map<number, ListedLearner>;
  /** When the walk started: the list is a snapshot from then on. */
  readAt: Date;
  requests: number;
  pages: number;
  total: number;
  /** Pages the list kept changing under (page-walker.ts): their learners may be misclassified. */
  unsettledPages: number[];
}

export interface ListCheckOptions {
  client: ListReader;
  tokens: readonly string[];
  /** The learners to look for. */
  wanted: ReadonlySet<number>;
  concurrency?: number | undefined;
  maxPages?: number | undefined;
  signal?: AbortSignal | undefined;
  onRetry?: ((page: number, code: string, waitMs: number) => void) | undefined;
}

/** Walks the whole list once and returns what it says of the wanted learners. */
export async function readListSnapshot(options: ListCheckOptions): Promise<ListSnapshot> {
  const found = new Map<number, ListedLearner>();
  const readAt = new Date();
  const walker = new PageWalker({
    client: options.client,
    tokens: options.tokens,
    concurrency: options.concurrency,
    maxPages: options.maxPages,
    signal: options.signal,
    onRetry: options.onRetry,
    // A re-read page holds the newer state: it overwrites what an earlier read said.
    onPages: (reads) => {
      for (const r of reads)
        for (const l of r.learners) if (options.wanted.has(l.id)) found.set(l.id, listed(l));
    },
  });
  const result = await walker.walk();
  return {
    found,
    readAt,
    requests: result.requests,
    pages: result.pass1Pages,
    total: result.total,
    unsettledPages: result.unsettledPages,
  };
}

function listed(l: Learner): ListedLearner {
  return {
    organizationId: l.organizationId,
    // The spec: a transfer is meant only for learners created with a user attached.
    hasUser: l.userId !== null && l.userId !== undefined,
    active: l.isActive === 1,
  };
}

/**
 * The class of one learner. In the target already wins over everything (no call either way); a learner
 * with no user is held whatever its activity; an inactive one with a user is still sent (only reported).
 */
export function classify(entry: ListedLearner | undefined, targetOrgId: number): CheckClass {
  if (!entry) return 'unknown';
  if (entry.organizationId === targetOrgId) return 'in-target';
  if (!entry.hasUser) return 'no-user';
  if (!entry.active) return 'inactive';
  return 'will-transfer';
}
