// plan --check: a CSV cohort checked against the learner list before any budget is spent on it
// (docs/preflight.md): each learner classed, the classes to a file, the ETA of what will be sent.
import { mkdirSync } from 'node:fs';
import { basename, dirname, extname, join } from 'node:path';
import type { AppContext } from '../../app/context.ts';
import { tokensOf } from '../../core/config.ts';
import { csvLine } from '../../core/csv-safe.ts';
import { LearnerTransferError } from '../../core/errors.ts';
import { PrivateOutput } from '../../core/private-file.ts';
import { OrgIds } from '../../queue/org-ids.ts';
import { readCsv } from '../../queue/sources/csv.ts';
import {
  CHECK_CLASSES,
  classify,
  readListSnapshot,
  type CheckClass,
  type ListSnapshot,
} from '../../queue/sources/list-check.ts';
import { requireClient } from './crawl.ts';
import { planOrgs, type OrgPlan } from './plan.ts';

export interface PreflightOptions {
  /** The cohort: a CSV, or (`runId`) the learners of a run still waiting for their transfer. */
  csv?: string | undefined;
  runId?: string | undefined;
  org: string;
  /** --target-org-id: checked against the ids in Redis and remembered there for later runs. */
  targetOrgId?: number | undefined;
  /** Where the classes go (default: defaultCheckFile). */
  out?: string | undefined;
  concurrency?: number | undefined;
  signal?: AbortSignal | undefined;
}

/** One learner of the cohort: where it came from, and what the list said. */
export interface CheckedLearner {
  /** Its first line in the CSV (0 for a run's learner). */
  line: number;
  /** `cohort.csv:12`, or the record's source for a run's learner (`jobs.csv:12`, `crawl:page 4`). */
  source: string;
  learnerId: number;
  cls: CheckClass;
  organizationId: number | undefined;
}

export interface PreflightResult {
  org: string;
  targetOrgId: number;
  learners: CheckedLearner[];
  counts: Record<CheckClass, number>;
  /** CSV rows rejected by the reader, or repeating a learner of an earlier line. */
  rejected: number;
  snapshot: Omit<ListSnapshot, 'found'>;
  outFile: string;
  /** The ETA of what will really be sent: will-transfer + inactive. */
  plans: OrgPlan[];
}

/** `cohort.csv` -> `cohort.check.csv`, next to it. */
export function defaultCheckFile(csv: string): string {
  return join(dirname(csv), `${basename(csv, extname(csv))}.check.csv`);
}

/** Classes that are sent: an inactive learner with a user is still transferred (only reported). */
export const SENT_CLASSES: readonly CheckClass[] = ['will-transfer', 'inactive'];

export async function runPreflight(ctx: AppContext, options: PreflightOptions): Promise<PreflightResult> {
  const { org } = options;
  // Given once, remembered (as crawl and reconcile do): the id is the organization's, not this check's.
  const targetOrgId = await new OrgIds(ctx.redis, ctx.keys).resolve(
    org,
    options.targetOrgId,
    '--target-org-id',
  );
  const { rows, rejected } = options.csv
    ? await readCohort(options.csv, org, ctx.config.orgs)
    : await runCohort(ctx, org, requireRun(options.runId));
  const outFile = options.out ?? defaultCheckFile(options.csv ?? join('out', `run-${options.runId}.csv`));
  // Refused before the list is read, not after.
  mkdirSync(dirname(outFile), { recursive: true });
  const out = new PrivateOutput(outFile);
  try {
    const { found, ...snapshot } = await readListSnapshot({
      client: requireClient(ctx),
      tokens: tokensOf(ctx.config, org).map((t) => t.secret),
      wanted: new Set(rows.keys()),
      concurrency: options.concurrency,
      maxPages: ctx.config.crawlMaxPages,
      signal: options.signal,
      // A check stopped midway resumes from here (list-check.ts); removed once the list is read whole.
      checkpoint: `${outFile}.partial`,
      scope: org,
    });
    const counts = Object.fromEntries(CHECK_CLASSES.map((c) => [c, 0])) as Record<CheckClass, number>;
    const learners: CheckedLearner[] = [];
    out.stream.write(csvLine(['source', 'learnerId', 'class', 'organizationId']));
    for (const [learnerId, { line, source }] of rows) {
      const entry = found.get(learnerId);
      const cls = classify(entry, targetOrgId);
      counts[cls]++;
      learners.push({ line, source, learnerId, cls, organizationId: entry?.organizationId });
      out.stream.write(csvLine([source, learnerId, cls, entry?.organizationId ?? '']));
    }
    await out.commit();
    const sent = learners.filter((l) => SENT_CLASSES.includes(l.cls)).map((l) => l.learnerId);
    const plans = await planOrgs(ctx, new Map([[org, sent]]));
    return { org, targetOrgId, learners, counts, rejected, snapshot, outFile, plans };
  } catch (err) {
    await out.abort();
    throw err;
  }
}

type Cohort = { rows: Map<number, { line: number; source: string }>; rejected: number };

function requireRun(runId: string | undefined): string {
  if (runId === undefined)
    throw new LearnerTransferError('LT_USAGE', 'plan --check needs --csv FILE or --run ID');
  return runId;
}

/**
 * The learners of a run still waiting for their transfer (queued or retrying) in `org`. A scan of the
 * organization's records: a check is rare, and the run keeps no list of its own.
 */
async function runCohort(ctx: AppContext, org: string, runId: string): Promise<Cohort> {
  if (!(await ctx.runs.get(runId))) throw new LearnerTransferError('LT_USAGE', `--run ${runId}: no such run`);
  const rows: Cohort['rows'] = new Map();
  for await (const [learnerId, r] of ctx.store.scan(org)) {
    if (r.r === runId && (r.b === 'queued' || r.b === 'retrying'))
      rows.set(learnerId, { line: 0, source: r.src ?? '' });
  }
  if (rows.size === 0) {
    throw new LearnerTransferError('LT_USAGE', `--run ${runId}: no learner of ${org} is still waiting in it`);
  }
  return { rows: new Map([...rows].sort(([a], [b]) => a - b)), rejected: 0 };
}

/** The CSV's learners (first line of each), all of `org`: a check reads one organization's list. */
async function readCohort(file: string, org: string, knownOrgs: readonly string[]): Promise<Cohort> {
  const name = basename(file);
  const rows: Cohort['rows'] = new Map();
  let rejected = 0;
  for await (const ev of readCsv({ file, defaultOrg: org, knownOrgs })) {
    if (ev.kind === 'reject') {
      rejected++;
      continue;
    }
    if (ev.org !== org) {
      throw new LearnerTransferError(
        'LT_USAGE',
        `${file} line ${ev.line}: organization '${ev.org}', but plan --check checks one organization ` +
          `(--org ${org}); check each organization's rows on their own`,
      );
    }
    if (rows.has(ev.learnerId)) rejected++;
    else rows.set(ev.learnerId, { line: ev.line, source: `${name}:${ev.line}` });
  }
  if (rows.size === 0) {
    throw new LearnerTransferError('LT_INPUT_INVALID', `${file}: no valid learner id was read`);
  }
  return { rows, rejected };
}

/** What the operator reads: counts per class, the snapshot's time, the file, and the ETA. */
export function formatPreflight(r: PreflightResult, cohort: string, applying = false): string {
  const width = Math.max(...CHECK_CLASSES.map((c) => c.length));
  const unsettled = r.snapshot.unsettledPages.length;
  return [
    `${cohort}: ${r.learners.length} learners of ${r.org} checked against the learner list ` +
      `(${r.snapshot.requests} list reads, no transfer calls${applying ? '' : ', no queue writes'})` +
      (r.rejected ? `; ${r.rejected} rows rejected or repeated` : ''),
    ...CHECK_CLASSES.map((c) => `  ${c.padEnd(width)}  ${r.counts[c]}`),
    `list read at ${r.snapshot.readAt.toISOString()}: a snapshot, the transfer stays the authority` +
      (r.snapshot.resumedAt > 1 ? ` (resumed at page ${r.snapshot.resumedAt})` : ''),
    ...(unsettled
      ? [`the list kept changing under ${unsettled} page(s): check again, or trust the transfer for them`]
      : []),
    `classes by line: ${r.outFile}`,
    ...r.plans.map((p) => `what will be sent: ${p.text}`),
  ].join('\n');
}
