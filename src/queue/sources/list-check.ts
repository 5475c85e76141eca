// The pre-flight's read of the learner list through the crawl's page walker, keeping only the learners
// asked about; no limiter permit, resumable from a checkpoint file (docs/preflight.md).
import { createHash } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { hasUser, isActiveLearner, type Learner } from '../../api/schemas.ts';
import { writePrivateFileSync } from '../../core/private-file.ts';
import { decodeMarks, type WalkMarks } from './page-marks.ts';
import { PageWalker, type ListReader, type PageRead } from './page-walker.ts';

/** A checkpoint is written at most this often while the list is read (and on failure or stop). */
export const CHECKPOINT_EVERY_MS = 5_000;

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
  /** When the walk started (the first walk, on a resume): the list is a snapshot from then on. */
  readAt: Date;
  /** The page a resumed check started at (1: not resumed). */
  resumedAt: number;
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
  /** Where to keep the checkpoint; removed once the list is read whole. */
  checkpoint?: string | undefined;
  /** What the checkpoint must match to be resumed (the organization): the learners are added to it. */
  scope?: string | undefined;
  batchPages?: number | undefined;
  /** Hears each batch of pages handled (tests stop a check midway with it). */
  onPages?: ((reads: readonly PageRead[]) => void) | undefined;
}

interface Checkpoint {
  v: 1;
  key: string;
  readAt: string;
  next: number;
  marks: string;
  /** [learnerId, organizationId, hasUser 0|1, active 0|1] */
  found: [number, number, number, number][];
}

function keyOf(scope: string, wanted: ReadonlySet<number>): string {
  const h = createHash('sha1').update(scope);
  for (const id of [...wanted].sort((a, b) => a - b)) h.update(`,${id}`);
  return h.digest('hex');
}

/** The checkpoint of these learners, or undefined (none, unreadable, or of another check). */
function loadCheckpoint(path: string, key: string): { cp: Checkpoint; marks: WalkMarks } | undefined {
  let cp: Checkpoint;
  try {
    cp = JSON.parse(readFileSync(path, 'utf8')) as Checkpoint;
  } catch {
    return undefined;
  }
  const marks = cp?.v === 1 && cp.key === key ? decodeMarks(cp.marks) : undefined;
  return marks && Number.isInteger(cp.next) && cp.next >= 1 && Array.isArray(cp.found)
    ? { cp, marks }
    : undefined;
}

/** Walks the whole list once and returns what it says of the wanted learners. */
export async function readListSnapshot(options: ListCheckOptions): Promise<ListSnapshot> {
  const found = new Map<number, ListedLearner>();
  const path = options.checkpoint;
  const key = keyOf(options.scope ?? '', options.wanted);
  const resumed = path ? loadCheckpoint(path, key) : undefined;
  for (const [id, organizationId, hasUser, active] of resumed?.cp.found ?? [])
    found.set(id, { organizationId, hasUser: hasUser === 1, active: active === 1 });
  const readAt = resumed ? new Date(resumed.cp.readAt) : new Date();
  const resumedAt = resumed?.cp.next ?? 1;
  let next = resumedAt;
  let marks = resumed ? resumed.cp.marks : '';
  let savedAt = Date.now();
  const save = () => {
    if (!path || !marks) return;
    const cp: Checkpoint = {
      v: 1,
      key,
      readAt: readAt.toISOString(),
      next,
      marks,
      found: [...found].map(([id, l]) => [id, l.organizationId, l.hasUser ? 1 : 0, l.active ? 1 : 0]),
    };
    writePrivateFileSync(path, JSON.stringify(cp));
    savedAt = Date.now();
  };
  const walker = new PageWalker({
    client: options.client,
    tokens: options.tokens,
    concurrency: options.concurrency,
    maxPages: options.maxPages,
    batchPages: options.batchPages,
    signal: options.signal,
    onRetry: options.onRetry,
    startPage: resumedAt,
    history: resumed?.marks,
    // A re-read page holds the newer state: it overwrites what an earlier read said.
    onPages: (reads) => {
      for (const r of reads) {
        for (const l of r.learners) if (options.wanted.has(l.id)) found.set(l.id, listed(l));
        marks = r.marks;
        if (r.pass === 1) next = r.page + 1;
      }
      if (Date.now() - savedAt >= CHECKPOINT_EVERY_MS) save();
      options.onPages?.(reads);
    },
  });
  let result;
  try {
    result = await walker.walk();
  } catch (err) {
    save();
    throw err;
  }
  if (path) rmSync(path, { force: true });
  return {
    found,
    readAt,
    resumedAt,
    requests: result.requests,
    pages: result.pass1Pages,
    total: result.total,
    unsettledPages: result.unsettledPages,
  };
}

function listed(l: Learner): ListedLearner {
  return {
    organizationId: l.organizationId,
    hasUser: hasUser(l),
    active: isActiveLearner(l),
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
