// Reports: one row per learner with its outcome code and details (CSV or NDJSON), or result files split
// in the manner of bulk loaders (successes, failures, not yet processed). Streams from HSCAN.
import { mkdirSync } from 'node:fs';
import { once } from 'node:events';
import { dirname, join } from 'node:path';
import type { OutcomeStore } from '../../outcomes/store.ts';
import {
  CANCELLED,
  isFinalBucket,
  isSuccessBucket,
  toLearnerOutcome,
  type Bucket,
  type LearnerOutcome,
} from '../../outcomes/record.ts';
import { csvLine } from '../../core/csv-safe.ts';
import { assertPrivateTarget, PrivateOutput } from '../../core/private-file.ts';
import { forTerminal, jsonForTerminal } from '../../core/terminal-safe.ts';

export const REPORT_COLUMNS = [
  'org',
  'learnerId',
  'outcome',
  'state',
  'httpStatus',
  'error',
  'message',
  'attempts',
  'transferId',
  'runId',
  'source',
  'enqueuedAt',
  'updatedAt',
  'tokenId',
] as const;

export interface ReportFilter {
  orgs: readonly string[];
  runId?: string | undefined;
  /** An outcome code or a state (queued, retrying). */
  status?: string | undefined;
}

/** The `outcome` column: the final code, or the state (queued, retrying) while the learner is not done. */
function outcomeColumn(o: LearnerOutcome): string {
  return o.state;
}

function rowOf(o: LearnerOutcome): unknown[] {
  return [
    o.org,
    o.learnerId,
    outcomeColumn(o),
    o.state,
    o.httpStatus,
    o.error,
    o.message,
    o.attempts,
    o.transferId,
    o.runId,
    o.source,
    o.enqueuedAt,
    o.updatedAt,
    o.tokenId,
  ];
}

function matches(record: { r: string; b: string; c?: string | undefined }, filter: ReportFilter): boolean {
  if (filter.runId && record.r !== filter.runId) return false;
  return !filter.status || record.b === filter.status || record.c === filter.status;
}

/**
 * The matching outcomes of each organization (in the filter's order) by learner id: the ids are read
 * first (8 bytes each: a million learners is 8 MB), sorted, then the records in chunks, so a split file is
 * in a useful order without the rows held in memory. A record that changed between the two reads is
 * written as it is at the second, and only if it still matches.
 */
export async function* outcomesById(
  store: OutcomeStore,
  filter: ReportFilter,
): AsyncGenerator<LearnerOutcome> {
  for (const org of filter.orgs) {
    const ids: number[] = [];
    for await (const [learnerId, record] of store.scan(org)) if (matches(record, filter)) ids.push(learnerId);
    ids.sort((a, b) => a - b);
    for (let i = 0; i < ids.length; i += 1000) {
      const chunk = ids.slice(i, i + 1000);
      const records = await store.getMany(org, chunk);
      for (const [j, learnerId] of chunk.entries()) {
        const record = records[j];
        if (record && matches(record, filter)) yield toLearnerOutcome(org, learnerId, record);
      }
    }
  }
}

export async function* selectOutcomes(
  store: OutcomeStore,
  filter: ReportFilter,
): AsyncGenerator<LearnerOutcome> {
  for (const org of filter.orgs) {
    for await (const [learnerId, record] of store.scan(org)) {
      if (matches(record, filter)) yield toLearnerOutcome(org, learnerId, record);
    }
  }
}

/**
 * Where rows go: a private file (mode 0600: it holds names and e-mails; written beside the target and
 * renamed into place when complete, never through a link: private-file.ts) or stdout, where the
 * service's text is stripped of control characters (a terminal would run its escape sequences).
 */
class Out {
  readonly stream: NodeJS.WritableStream;
  readonly #own: PrivateOutput | undefined;
  constructor(path: string | undefined, stdout: NodeJS.WritableStream = process.stdout) {
    if (path) {
      mkdirSync(dirname(path), { recursive: true });
      this.#own = new PrivateOutput(path);
      this.stream = this.#own.stream;
    } else {
      this.stream = stdout;
    }
  }
  /** `json`: the text is JSON, escaped losslessly rather than stripped. */
  async write(text: string, json = false): Promise<void> {
    const safe = this.#own ? text : json ? jsonForTerminal(text) : forTerminal(text);
    if (!this.stream.write(safe)) await once(this.stream, 'drain');
  }
  /** Complete: the file takes its place. Failed (`ok` false): the target is left as it was. */
  async close(ok: boolean): Promise<void> {
    if (ok) await this.#own?.commit();
    else await this.#own?.abort();
  }
}

export async function writeReport(
  store: OutcomeStore,
  filter: ReportFilter,
  options: {
    format: 'csv' | 'ndjson';
    out?: string | undefined;
    /** Where rows go without `out` (the command's stdout). */
    stdout?: NodeJS.WritableStream;
  },
): Promise<number> {
  const out = new Out(options.out, options.stdout);
  let rows = 0;
  try {
    if (options.format === 'csv') await out.write(csvLine(REPORT_COLUMNS));
    for await (const o of selectOutcomes(store, filter)) {
      rows++;
      if (options.format === 'csv') await out.write(csvLine(rowOf(o)));
      else await out.write(`${JSON.stringify({ ...o, outcome: outcomeColumn(o) })}\n`, true);
    }
  } catch (err) {
    await out.close(false);
    throw err;
  }
  await out.close(true);
  return rows;
}

/** The split's files as the command prints them: count, path, and "(empty: header only)" for an empty one. */
export function formatSplit(s: SplitSummary): string {
  const kinds = ['successes', 'failures', 'pending', 'cancelled'] as const;
  const width = Math.max(...kinds.map((k) => `${k} ${s[k]}`.length));
  return kinds
    .map((k) => {
      const label = `${k} ${s[k]}`;
      const pad = ' '.repeat(width - label.length);
      return `${k} ${pad}${s[k]} -> ${s.files[k]}${s[k] === 0 ? ' (empty: header only)' : ''}`;
    })
    .join('\n');
}

export interface SplitSummary {
  successes: number;
  failures: number;
  pending: number;
  /** Withdrawn by an operator (`cancel`): neither a success nor a failure. */
  cancelled: number;
  files: { successes: string; failures: string; pending: string; cancelled: string };
}

/**
 * successes.csv, failures.csv, pending.csv (not yet processed) and cancelled.csv in DIR, like bulk
 * loaders' result files: each by organization (the filter's order), then by learner id. All four are
 * written, an empty one with its header alone (an older split's file in DIR must not outlive this one);
 * the command's output says which are empty.
 */
export async function writeSplit(
  store: OutcomeStore,
  filter: ReportFilter,
  dir: string,
): Promise<SplitSummary> {
  const files = {
    successes: join(dir, 'successes.csv'),
    failures: join(dir, 'failures.csv'),
    pending: join(dir, 'pending.csv'),
    cancelled: join(dir, 'cancelled.csv'),
  };
  // Every target is checked before any file is started: one planted link refuses the whole split.
  for (const file of Object.values(files)) assertPrivateTarget(file);
  const opened: Out[] = [];
  const open = (path: string) => {
    const out = new Out(path);
    opened.push(out);
    return out;
  };
  const counts = { successes: 0, failures: 0, pending: 0, cancelled: 0 };
  try {
    const outs = {
      successes: open(files.successes),
      failures: open(files.failures),
      pending: open(files.pending),
      cancelled: open(files.cancelled),
    };
    for (const o of Object.values(outs)) await o.write(csvLine(REPORT_COLUMNS));
    for await (const o of outcomesById(store, filter)) {
      const kind = isSuccessBucket(o.state as Bucket)
        ? 'successes'
        : o.state === CANCELLED
          ? 'cancelled'
          : isFinalBucket(o.state as Bucket)
            ? 'failures'
            : 'pending';
      counts[kind]++;
      await outs[kind].write(csvLine(rowOf(o)));
    }
  } catch (err) {
    for (const o of opened) await o.close(false);
    throw err;
  }
  for (const o of opened) await o.close(true);
  return { ...counts, files };
}
