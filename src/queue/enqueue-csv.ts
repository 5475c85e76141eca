// enqueue --csv: the CSV's valid rows, deduplicated, to the producer in batches; every bad line to a
// rejects file with its reason.
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { once } from 'node:events';
import { csvLine } from '../core/csv-safe.ts';
import { assertPrivateTarget, PrivateOutput } from '../core/private-file.ts';
import type { Runs } from '../outcomes/runs.ts';
import { addCounts, emptyCounts, type ProduceCounts, type Producer, type ProducerItem } from './producer.ts';
import { readCsv } from './sources/csv.ts';
import { IdLineMap } from './id-line-map.ts';
import { basename } from 'node:path';

export interface EnqueueCsvOptions {
  file: string;
  defaultOrg?: string | undefined;
  knownOrgs: readonly string[];
  runId: string;
  rejectsFile: string;
  batchSize?: number;
  /** Progress: data rows read so far, bytes read so far. */
  onProgress?: (rows: number, bytes: number, counts: ProduceCounts & { rejected: number }) => void;
  /** Called for each reject as it is found (the CLI prints the first few). */
  onReject?: (line: number, reason: string) => void;
  /** Move learners claimed by another organization to the organization of their row (--move). */
  move?: boolean;
}

export interface EnqueueCsvSummary extends ProduceCounts {
  runId: string;
  file: string;
  /** Data rows read (header excluded). */
  read: number;
  valid: number;
  rejected: number;
  /** Path of the rejects file, when there were rejects. */
  rejectsFile: string | null;
  byOrg: Record<string, number>;
}

/**
 * Batches on their way to Redis at once. One: two (or one while the next is read from the file) cost
 * 8-17 MB more peak RSS (300,000 rows: 233 to 242 MB against 225 and 225) for 0-4% more speed: the
 * producer waits on Redis running its scripts, not on the file, which is cheap to read now
 * (bench/enqueue.ts, enqueue-child.ts).
 */
const MAX_IN_FLIGHT = 1;

/** The rejects file: private (private-file.ts), started at the first reject, in place once complete. */
class RejectsWriter {
  #out: PrivateOutput | undefined;
  readonly #path: string;
  constructor(path: string) {
    // Refused before anything is enqueued, not at the first reject.
    assertPrivateTarget(path);
    this.#path = path;
  }
  async write(line: number, reason: string, raw: string): Promise<void> {
    if (!this.#out) {
      mkdirSync(dirname(this.#path), { recursive: true });
      this.#out = new PrivateOutput(this.#path);
      this.#out.stream.write(csvLine(['line', 'reason', 'raw']));
    }
    const stream = this.#out.stream;
    if (!stream.write(csvLine([line, reason, raw]))) await once(stream, 'drain');
  }
  get path(): string | null {
    return this.#out ? this.#path : null;
  }
  /** `ok` false: the rejects so far are dropped, the target left as it was. */
  async close(ok: boolean): Promise<void> {
    if (ok) await this.#out?.commit();
    else await this.#out?.abort();
  }
}

export async function enqueueCsv(
  deps: { producer: Producer; runs: Runs },
  options: EnqueueCsvOptions,
): Promise<EnqueueCsvSummary> {
  const enqueue = new CsvEnqueue(deps, options);
  const batchSize = options.batchSize ?? 1000;
  const source = basename(options.file);
  // First line of each learner seen, and its organization: duplicates are rejected with a pointer to it.
  const seen = new FirstLines();
  let batch: ProducerItem[] = [];
  try {
    for await (const ev of readCsv({
      file: options.file,
      defaultOrg: options.defaultOrg,
      knownOrgs: options.knownOrgs,
      onBytes: (b) => {
        enqueue.bytes = b;
      },
    })) {
      enqueue.read++;
      if (ev.kind === 'reject') {
        await enqueue.reject(ev.line, ev.reason, ev.raw);
        continue;
      }
      const repeated = seen.repeatOf(ev, source);
      if (repeated !== undefined) {
        await enqueue.reject(ev.line, repeated, String(ev.learnerId));
        continue;
      }
      enqueue.valid++;
      enqueue.byOrg[ev.org] = (enqueue.byOrg[ev.org] ?? 0) + 1;
      batch.push({ org: ev.org, learnerId: ev.learnerId, source: `${source}:${ev.line}`, line: ev.line });
      if (batch.length >= batchSize) {
        await enqueue.send(batch);
        batch = [];
      } else if (enqueue.read % 1000 === 0) enqueue.progress();
    }
    await enqueue.send(batch);
    await enqueue.drain();
  } catch (err) {
    await enqueue.abort();
    throw err;
  }
  return enqueue.finish();
}

/**
 * The first line of each learner in the file and the organization it was named under: one map for the
 * whole file (a learner has one organization), the organization kept as a small index.
 */
export class FirstLines {
  readonly #lines = new IdLineMap();
  readonly #orgs: string[] = [];
  readonly #index = new Map<string, number>();

  /**
   * Why a row repeats an earlier one (the same learner twice in its organization, or already named under
   * another: one learner, one organization), or undefined: the row is then remembered as the first.
   */
  repeatOf(ev: { line: number; learnerId: number; org: string }, source: string): string | undefined {
    const firstLine = this.#lines.get(ev.learnerId);
    if (firstLine === undefined) {
      this.#lines.set(ev.learnerId, ev.line, this.#tag(ev.org));
      return undefined;
    }
    const org = this.#orgs[this.#lines.tagOf(ev.learnerId) ?? 0] ?? ev.org;
    if (org === ev.org) return `duplicate of line ${firstLine} (learner ${ev.learnerId} in ${ev.org})`;
    // One learner, one organization: a later row naming it under another organization is refused.
    return `learner ${ev.learnerId} is claimed by organization '${org}' on line ${firstLine} of ${source}: one learner, one organization`;
  }

  #tag(org: string): number {
    let i = this.#index.get(org);
    if (i === undefined) {
      i = this.#orgs.push(org) - 1;
      this.#index.set(org, i);
    }
    return i;
  }
}

/** One enqueue's counters, its rejects file and its batches in flight. */
class CsvEnqueue {
  read = 0;
  valid = 0;
  rejected = 0;
  bytes = 0;
  readonly byOrg: Record<string, number> = {};
  readonly #counts = emptyCounts();
  readonly #rejects: RejectsWriter;
  readonly #orgsTouched = new Set<string>();
  readonly #inFlight: Promise<void>[] = [];
  readonly #deps: { producer: Producer; runs: Runs };
  readonly #options: EnqueueCsvOptions;

  constructor(deps: { producer: Producer; runs: Runs }, options: EnqueueCsvOptions) {
    this.#deps = deps;
    this.#options = options;
    this.#rejects = new RejectsWriter(options.rejectsFile);
  }

  progress(): void {
    this.#options.onProgress?.(this.read, this.bytes, { ...this.#counts, rejected: this.rejected });
  }

  async reject(line: number, reason: string, raw: string): Promise<void> {
    this.rejected++;
    this.#options.onReject?.(line, reason);
    await this.#rejects.write(line, reason, raw);
  }

  /**
   * Up to MAX_IN_FLIGHT batches go to Redis at once. Batches are disjoint (in-file duplicates are
   * rejected), so order is free.
   */
  async send(items: ProducerItem[]): Promise<void> {
    if (items.length === 0) return;
    const inFlight = this.#inFlight;
    const { runs, producer } = this.#deps;
    const { runId } = this.#options;
    const newOrgs = [...new Set(items.map((b) => b.org))].filter((o) => !this.#orgsTouched.has(o));
    if (newOrgs.length > 0) {
      newOrgs.forEach((o) => this.#orgsTouched.add(o));
      await runs.addOrgs(runId, newOrgs);
    }
    const p = producer
      .add(items, runId, {
        move: this.#options.move === true,
        // A person names these learners: one cancelled earlier is re-opened (docs/cancel.md).
        reopenCancelled: true,
        onClaimedElsewhere: (h) => {
          // Counted valid when read: it is a reject now.
          this.valid--;
          this.byOrg[h.item.org] = (this.byOrg[h.item.org] ?? 1) - 1;
          return this.reject(h.item.line ?? 0, h.reason, String(h.item.learnerId));
        },
      })
      .then((c) => {
        addCounts(this.#counts, c);
        this.progress();
      });
    inFlight.push(p);
    p.then(
      () => inFlight.splice(inFlight.indexOf(p), 1),
      () => {},
    );
    // A batch that failed stays in the list: the race throws its error here.
    if (inFlight.length >= MAX_IN_FLIGHT) await Promise.race(inFlight);
  }

  async drain(): Promise<void> {
    await Promise.all(this.#inFlight);
  }

  /** A failed batch must not leave others writing after we return. */
  async abort(): Promise<void> {
    await Promise.allSettled(this.#inFlight);
    await this.#rejects.close(false);
  }

  async finish(): Promise<EnqueueCsvSummary> {
    await this.#rejects.close(true);
    return {
      ...this.#counts,
      runId: this.#options.runId,
      file: this.#options.file,
      read: this.read,
      valid: this.valid,
      rejected: this.rejected,
      rejectsFile: this.#rejects.path,
      byOrg: this.byOrg,
    };
  }
}
