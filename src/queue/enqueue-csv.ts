// enqueue --csv: CSV source -> validation and in-file dedupe -> producer, in batches, with a rejects
// file that names every bad line and why. Valid rows always go through, whatever the bad ones are.
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

const MAX_IN_FLIGHT = 2;

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
  /** `ok` false (the enqueue failed): the rejects so far are dropped, the target left as it was. */
  async close(ok: boolean): Promise<void> {
    if (ok) await this.#out?.commit();
    else await this.#out?.abort();
  }
}

export async function enqueueCsv(
  deps: { producer: Producer; runs: Runs },
  options: EnqueueCsvOptions,
): Promise<EnqueueCsvSummary> {
  const batchSize = options.batchSize ?? 1000;
  const counts = emptyCounts();
  const rejects = new RejectsWriter(options.rejectsFile);
  // First line of each (org, learner) seen: duplicates are rejected with a pointer to it.
  const seen = new Map<string, IdLineMap>();
  const byOrg: Record<string, number> = {};
  const source = basename(options.file);
  let read = 0;
  let valid = 0;
  let rejected = 0;
  let bytes = 0;
  let batch: ProducerItem[] = [];
  const orgsTouched = new Set<string>();

  // Up to MAX_IN_FLIGHT batches go to Redis at once, so reading the file, the outcome seeding and
  // addBulk overlap. Batches are disjoint (in-file duplicates are rejected above), so order is free.
  const inFlight: Promise<void>[] = [];
  const flush = async () => {
    if (batch.length === 0) return;
    const items = batch;
    batch = [];
    const newOrgs = [...new Set(items.map((b) => b.org))].filter((o) => !orgsTouched.has(o));
    if (newOrgs.length > 0) {
      newOrgs.forEach((o) => orgsTouched.add(o));
      await deps.runs.addOrgs(options.runId, newOrgs);
    }
    const p = deps.producer
      .add(items, options.runId, {
        move: options.move === true,
        onHeld: (h) => {
          // Counted valid when read: it is a reject now.
          valid--;
          byOrg[h.item.org] = (byOrg[h.item.org] ?? 1) - 1;
          return reject(h.item.line ?? 0, h.reason, String(h.item.learnerId));
        },
      })
      .then((c) => {
        addCounts(counts, c);
        options.onProgress?.(read, bytes, { ...counts, rejected });
      });
    inFlight.push(p);
    p.then(
      () => inFlight.splice(inFlight.indexOf(p), 1),
      () => {},
    );
    if (inFlight.length >= MAX_IN_FLIGHT) await Promise.race(inFlight);
  };
  const reject = async (line: number, reason: string, raw: string) => {
    rejected++;
    options.onReject?.(line, reason);
    await rejects.write(line, reason, raw);
  };

  try {
    for await (const ev of readCsv({
      file: options.file,
      defaultOrg: options.defaultOrg,
      knownOrgs: options.knownOrgs,
      onBytes: (b) => {
        bytes = b;
      },
    })) {
      read++;
      if (ev.kind === 'reject') {
        await reject(ev.line, ev.reason, ev.raw);
        continue;
      }
      let orgSeen = seen.get(ev.org);
      if (!orgSeen) seen.set(ev.org, (orgSeen = new IdLineMap()));
      const firstLine = orgSeen.get(ev.learnerId);
      if (firstLine !== undefined) {
        await reject(
          ev.line,
          `duplicate of line ${firstLine} (learner ${ev.learnerId} in ${ev.org})`,
          String(ev.learnerId),
        );
        continue;
      }
      // One learner, one organization: a later row naming it under another organization is refused.
      let elsewhere: [string, number] | undefined;
      for (const [org, map] of seen) {
        const line = org === ev.org ? undefined : map.get(ev.learnerId);
        if (line !== undefined) elsewhere = [org, line];
      }
      if (elsewhere) {
        await reject(
          ev.line,
          `learner ${ev.learnerId} is claimed by organization '${elsewhere[0]}' on line ${elsewhere[1]} of ${source}: one learner, one organization`,
          String(ev.learnerId),
        );
        continue;
      }
      orgSeen.set(ev.learnerId, ev.line);
      valid++;
      byOrg[ev.org] = (byOrg[ev.org] ?? 0) + 1;
      batch.push({ org: ev.org, learnerId: ev.learnerId, source: `${source}:${ev.line}`, line: ev.line });
      if (batch.length >= batchSize) await flush();
      else if (read % 1000 === 0) options.onProgress?.(read, bytes, { ...counts, rejected });
    }
    await flush();
    await Promise.all(inFlight);
  } catch (err) {
    // A failed batch must not leave others writing after we return.
    await Promise.allSettled(inFlight);
    await rejects.close(false);
    throw err;
  }
  await rejects.close(true);
  return {
    ...counts,
    runId: options.runId,
    file: options.file,
    read,
    valid,
    rejected,
    rejectsFile: rejects.path,
    byOrg,
  };
}
