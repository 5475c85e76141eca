// reconcile: walks the learner list against a desired-state CSV; every learner in another organization
// is enqueued (a final record re-opened), one not listed is only reported, in a drift report per run.
// Not resumable: it is idempotent, so a reconcile that died is run again.
import type { CanaryMeta } from '../../outcomes/runs.ts';
import { mkdirSync } from 'node:fs';
import { basename, join } from 'node:path';
import { LearnerTransferError } from '../../core/errors.ts';
import { csvLine } from '../../core/csv-safe.ts';
import { assertPrivateTarget, writePrivateFileSync } from '../../core/private-file.ts';
import type { Bucket } from '../../outcomes/record.ts';
import type { OutcomeStore } from '../../outcomes/store.ts';
import type { Runs } from '../../outcomes/runs.ts';
import { newRunId } from '../../outcomes/runs.ts';
import {
  addCounts,
  emptyCounts,
  formatClaimedElsewhere,
  claimedElsewhereTotal,
  type ProduceCounts,
  type Producer,
  type ProducerItem,
} from '../producer.ts';
import { unknownOrgId } from '../org-ids.ts';
import { readCsv } from './csv.ts';
import { PageWalker, type ListReader, type WalkResult } from './page-walker.ts';

export interface ReconcileDeps {
  producer: Producer;
  runs: Runs;
  store: OutcomeStore;
  client: ListReader;
}

export interface ReconcileOptions {
  file: string;
  defaultOrg?: string | undefined;
  knownOrgs: readonly string[];
  /** Numeric id of every organization key the file names (see org-ids.ts). */
  orgIds: Readonly<Record<string, number>>;
  /** Token secrets that may list learners (any organization's: the list is the reseller's). */
  tokens: readonly string[];
  runId?: string | undefined;
  /** Where the drift report goes (default <reportDir>/<run>). */
  outDir?: string | undefined;
  /** DRIFT_REPORT_DIR: the directory of each reconcile's report directory (default out). */
  reportDir?: string | undefined;
  /** Read only: no run, no queue writes, no report files; the drift ids come back for plan. */
  dryRun?: boolean | undefined;
  /** Run source text (the schedule names itself here). */
  sourceLabel?: string | undefined;
  /** A canary run (--canary N, docs/canary.md) for the new run. */
  canary?: CanaryMeta | undefined;
  concurrency?: number | undefined;
  retries?: number | undefined;
  backoffMs?: number | undefined;
  /** Most pages the list may claim (CRAWL_MAX_PAGES): the walk stops with an error past it. */
  maxPages?: number | undefined;
  signal?: AbortSignal | undefined;
  onProgress?: (pagesDone: number, lastPage: number, matched: number) => void;
  onReject?: (line: number, reason: string) => void;
  /** Whether an error may quote the file's cells (csv.ts); a scheduled reconcile says false. */
  quoteCells?: boolean | undefined;
}

export type DriftKind = 'wrong-org' | 'not-found';

export interface DriftRow {
  learnerId: number;
  line: number;
  desiredOrg: string;
  desiredOrgId: number;
  currentOrgId: number | null;
  kind: DriftKind;
  /** The learner's outcome-store bucket before this run (empty when it had none). */
  before: string;
}

export interface ReconcileSummary extends ProduceCounts {
  runId: string | null;
  file: string;
  desired: number;
  rejected: number;
  inPlace: number;
  wrongOrg: number;
  notFound: number;
  /** Drift to enqueue, per organization. */
  byOrg: Record<string, number>;
  requests: number;
  rereads: number;
  unsettledPages: number[];
  driftFile: string | null;
  summaryFile: string | null;
  /** Dry run: the learners a reconcile would enqueue, per organization. */
  driftIds?: Map<string, number[]>;
}

interface Desired {
  org: string;
  line: number;
}

interface Reject {
  line: number;
  reason: string;
  raw: string;
}

export async function reconcile(deps: ReconcileDeps, options: ReconcileOptions): Promise<ReconcileSummary> {
  const { desired, rejects } = await readDesired(options);
  const { actual, walk, walkStartedAt } = await walkActual(deps, options, desired);
  const { drift, inPlace } = findDrift(desired, actual, options.orgIds);
  const toMove = drift.filter((r) => r.kind === 'wrong-org');
  const { byOrg, driftIds, rowsByOrg } = groupByOrg(toMove);
  await fillStateBefore(deps.store, driftIds, rowsByOrg);

  const base = {
    file: options.file,
    desired: desired.size,
    rejected: rejects.length,
    inPlace,
    wrongOrg: toMove.length,
    notFound: drift.length - toMove.length,
    byOrg,
    requests: walk.requests,
    rereads: walk.rereads,
    unsettledPages: walk.unsettledPages,
  };
  if (options.dryRun) {
    return { ...base, ...emptyCounts(), runId: null, driftFile: null, summaryFile: null, driftIds };
  }
  // Nothing differed (and no row was refused): no run and no report, so a nightly reconcile of a fleet
  // in place leaves nothing behind in Redis or on disk.
  if (drift.length === 0 && rejects.length === 0) {
    return { ...base, ...emptyCounts(), runId: null, driftFile: null, summaryFile: null };
  }

  // A run only when there is something to enqueue; the report of what differed either way.
  const runId = toMove.length > 0 ? (options.runId ?? newRunId()) : null;
  const outDir = options.outDir ?? join(options.reportDir ?? 'out', runId ?? `reconcile-${newRunId()}`);
  const driftFile = join(outDir, 'drift.csv');
  const summaryFile = join(outDir, 'drift-summary.json');
  // Refused before anything is enqueued: a planted link at a report's path is not written through.
  assertPrivateTarget(driftFile);
  assertPrivateTarget(summaryFile);
  const counts = runId
    ? await enqueueDrift(deps, options, runId, toMove, byOrg, walkStartedAt, driftFile)
    : emptyCounts();

  mkdirSync(outDir, { recursive: true });
  writePrivateFileSync(driftFile, driftCsv(drift, rejects));
  const summary: ReconcileSummary = {
    ...base,
    ...counts,
    runId,
    driftFile,
    summaryFile,
  };
  writePrivateFileSync(
    summary.summaryFile as string,
    `${JSON.stringify({ ...summary, createdAt: new Date().toISOString() }, null, 2)}\n`,
  );
  return summary;
}

/** The desired state: each learner's organization (its first line), and the rows refused. */
async function readDesired(
  options: ReconcileOptions,
): Promise<{ desired: Map<number, Desired>; rejects: Reject[] }> {
  const desired = new Map<number, Desired>();
  const rejects: Reject[] = [];
  const reject = (line: number, reason: string, raw: string) => {
    rejects.push({ line, reason, raw });
    options.onReject?.(line, reason);
  };
  for await (const ev of readCsv({
    file: options.file,
    defaultOrg: options.defaultOrg,
    knownOrgs: options.knownOrgs,
    quoteCells: options.quoteCells,
  })) {
    if (ev.kind === 'reject') {
      reject(ev.line, ev.reason, ev.raw);
      continue;
    }
    const first = desired.get(ev.learnerId);
    if (first && first.org !== ev.org) {
      reject(
        ev.line,
        `learner ${ev.learnerId} is desired in ${ev.org} here and in ${first.org} on line ${first.line}`,
        String(ev.learnerId),
      );
    } else if (!first) desired.set(ev.learnerId, { org: ev.org, line: ev.line });
  }
  if (desired.size === 0) {
    throw new LearnerTransferError('LT_INPUT_INVALID', `${options.file}: no valid desired learner was read`);
  }
  const orgs = [...new Set([...desired.values()].map((d) => d.org))];
  const missing = orgs.filter((o) => options.orgIds[o] === undefined);
  if (missing.length > 0) {
    throw unknownOrgId(missing.join(', '), missing.map((o) => `--org-id ${o}=N`).join(' '));
  }
  return { desired, rejects };
}

/** The actual owner of every desired learner, read from the list: latest sight wins. */
async function walkActual(
  deps: ReconcileDeps,
  options: ReconcileOptions,
  desired: ReadonlyMap<number, Desired>,
): Promise<{ actual: Map<number, number>; walk: WalkResult; walkStartedAt: number }> {
  const actual = new Map<number, number>();
  let pagesDone = 0;
  const walker = new PageWalker({
    client: deps.client,
    tokens: options.tokens,
    concurrency: options.concurrency,
    retries: options.retries,
    backoffMs: options.backoffMs,
    maxPages: options.maxPages,
    signal: options.signal,
    onPage: (read) => {
      for (const l of read.learners) if (desired.has(l.id)) actual.set(l.id, l.organizationId);
      if (read.pass === 1) pagesDone = read.page;
      options.onProgress?.(pagesDone, read.lastPage, actual.size);
    },
  });
  // Final records updated after this moment were moved by workers after their page may have been read:
  // the walk's view of them is stale, so they are not re-opened (no second irreversible call).
  const walkStartedAt = Date.now();
  const walk = await walker.walk();
  return { actual, walk, walkStartedAt };
}

/** Every desired learner not in its organization, in the file's order, and how many are in place. */
function findDrift(
  desired: ReadonlyMap<number, Desired>,
  actual: ReadonlyMap<number, number>,
  orgIds: Readonly<Record<string, number>>,
): { drift: DriftRow[]; inPlace: number } {
  const drift: DriftRow[] = [];
  let inPlace = 0;
  for (const [learnerId, d] of desired) {
    const desiredOrgId = orgIds[d.org] as number;
    const current = actual.get(learnerId);
    if (current === desiredOrgId) {
      inPlace++;
      continue;
    }
    drift.push({
      learnerId,
      line: d.line,
      desiredOrg: d.org,
      desiredOrgId,
      currentOrgId: current ?? null,
      kind: current === undefined ? 'not-found' : 'wrong-org',
      before: '',
    });
  }
  return { drift, inPlace };
}

/** The learners to move, counted, listed and kept as rows per organization. */
function groupByOrg(toMove: readonly DriftRow[]): {
  byOrg: Record<string, number>;
  driftIds: Map<string, number[]>;
  rowsByOrg: Map<string, DriftRow[]>;
} {
  const byOrg: Record<string, number> = {};
  const driftIds = new Map<string, number[]>();
  // Rows per organization, built with push: a drift of 100,000 learners must not copy its list each time.
  const rowsByOrg = new Map<string, DriftRow[]>();
  for (const r of toMove) {
    byOrg[r.desiredOrg] = (byOrg[r.desiredOrg] ?? 0) + 1;
    let ids = driftIds.get(r.desiredOrg);
    let rows = rowsByOrg.get(r.desiredOrg);
    if (!ids || !rows) {
      ids = [];
      rows = [];
      driftIds.set(r.desiredOrg, ids);
      rowsByOrg.set(r.desiredOrg, rows);
    }
    ids.push(r.learnerId);
    rows.push(r);
  }
  return { byOrg, driftIds, rowsByOrg };
}

/** The state each learner had before, for the report. */
async function fillStateBefore(
  store: OutcomeStore,
  driftIds: ReadonlyMap<string, number[]>,
  rowsByOrg: ReadonlyMap<string, DriftRow[]>,
): Promise<void> {
  for (const [org, ids] of driftIds) {
    const rows = rowsByOrg.get(org) ?? [];
    for (let i = 0; i < ids.length; i += 1000) {
      const records = await store.getMany(org, ids.slice(i, i + 1000));
      records.forEach((rec, j) => {
        const row = rows[i + j];
        if (row && rec) row.before = rec.b as Bucket;
      });
    }
  }
}

/** The run (created when new) and the learners in the wrong organization, enqueued in batches. */
async function enqueueDrift(
  deps: ReconcileDeps,
  options: ReconcileOptions,
  runId: string,
  toMove: readonly DriftRow[],
  byOrg: Record<string, number>,
  walkStartedAt: number,
  driftFile: string,
): Promise<ProduceCounts> {
  const counts = emptyCounts();
  if (!(await deps.runs.get(runId))) {
    await deps.runs.create({
      id: runId,
      kind: 'reconcile',
      source: options.sourceLabel ?? `reconcile ${basename(options.file)}`,
      orgs: Object.keys(byOrg),
      driftReport: driftFile,
      ...(options.canary ? { canary: options.canary } : {}),
    });
  } else await deps.runs.setDriftReport(runId, driftFile);
  const source = basename(options.file);
  for (let i = 0; i < toMove.length; i += 1000) {
    const items: ProducerItem[] = toMove.slice(i, i + 1000).map((r) => ({
      org: r.desiredOrg,
      learnerId: r.learnerId,
      source: `reconcile:${source}:${r.line}`,
      // Where the list shows it now: the organization `report --reverse` would move it back to.
      ...(r.currentOrgId !== null ? { previousOrgId: r.currentOrgId } : {}),
    }));
    // The desired-state file is the explicit act that moves a learner claimed by another organization
    // (once it is done or failed there): each move is written in the audit stream.
    addCounts(counts, await deps.producer.add(items, runId, { force: walkStartedAt, move: true }));
  }
  return counts;
}

/** The drift report: one line per drifted learner, then one per rejected row. */
function driftCsv(drift: readonly DriftRow[], rejects: readonly Reject[]): string {
  const lines = [
    csvLine([
      'learnerId',
      'line',
      'kind',
      'desiredOrg',
      'desiredOrgId',
      'currentOrgId',
      'stateBefore',
      'action',
    ]),
  ];
  for (const r of drift) {
    lines.push(
      csvLine([
        r.learnerId,
        r.line,
        r.kind,
        r.desiredOrg,
        r.desiredOrgId,
        r.currentOrgId ?? '',
        r.before,
        r.kind === 'wrong-org' ? 'enqueued' : 'reported',
      ]),
    );
  }
  for (const r of rejects) lines.push(csvLine([r.raw, r.line, 'rejected', '', '', '', '', r.reason]));
  return lines.join('');
}

export function formatReconcileSummary(s: ReconcileSummary): string {
  const done = Object.values(s.alreadyDone).reduce((a, b) => a + (b ?? 0), 0);
  return [
    `${s.runId ? `run ${s.runId}: ` : ''}reconcile ${s.file}`,
    `  desired      ${s.desired} learners (${s.rejected} rows rejected)`,
    `  in place     ${s.inPlace}`,
    `  wrong org    ${s.wrongOrg}${
      Object.keys(s.byOrg).length
        ? ` (${Object.entries(s.byOrg)
            .map(([o, n]) => `${n} to ${o}`)
            .join(', ')})`
        : ''
    }`,
    `  not found    ${s.notFound} (reported, not enqueued)`,
    ...(s.runId
      ? [
          `  enqueued     ${s.enqueued}`,
          ...(s.moved ? [`  moved        ${s.moved} from another organization (written in the audit)`] : []),
          ...(claimedElsewhereTotal(s)
            ? [
                `  claimed elsewhere ${claimedElsewhereTotal(s)} (${formatClaimedElsewhere(s)}: still in progress there)`,
              ]
            : []),
          `  already queued ${s.alreadyQueued}`,
          ...(done ? [`  kept (final) ${done}`] : []),
        ]
      : []),
    `  list         ${s.requests} page reads (${s.rereads} re-reads)${
      s.unsettledPages.length ? `; still changing on pages ${s.unsettledPages.join(', ')}: run again` : ''
    }`,
    ...(s.driftFile ? [`  drift report ${s.driftFile}, ${s.summaryFile}`] : []),
  ].join('\n');
}
