// The CSV source: streams a file of learner ids (never loads it whole) and yields valid rows and
// rejects, each with its line number. It decides nothing about queues: the producer does that.
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { Transform, type TransformCallback } from 'node:stream';
import { TextDecoder } from 'node:util';
import { parse, type CsvError } from 'csv-parse';
import { LearnerTransferError } from '../../errors.ts';
import { isValidOrgKey } from '../../keys.ts';

export type CsvEvent =
  | { kind: 'row'; line: number; learnerId: number; org: string }
  | { kind: 'reject'; line: number; reason: string; raw: string };

export interface CsvSourceOptions {
  file: string;
  /** Organization for rows without an `org` cell. */
  defaultOrg?: string | undefined;
  /** Organizations that have a token; a row naming another is rejected. */
  knownOrgs: readonly string[];
  /** Called with bytes read so far, for progress. */
  onBytes?: (bytes: number) => void;
  /** Longest record accepted (a 10 MB line is rejected, not buffered without bound). */
  maxRecordBytes?: number;
}

const ID_HEADERS = new Set(['learnerid', 'learner_id', 'id']);
const ORG_HEADERS = new Set(['org', 'organization', 'org_key', 'orgkey']);

/** Checks one learner id cell. Returns the id or the reason it is not one. */
export function parseLearnerId(cell: string | undefined): number | string {
  const text = (cell ?? '').trim();
  if (text === '') return 'learner id is empty';
  const shown = text.length > 40 ? `${text.slice(0, 37)}...` : text;
  if (/^[+-]?\d+(\.\d+)?([eE][+-]?\d+)?$/.test(text) && !/^\d+$/.test(text)) {
    if (text.startsWith('-')) return `learner id '${shown}' is negative`;
    return `learner id '${shown}' is not a whole number`;
  }
  if (!/^\d+$/.test(text)) return `learner id '${shown}' is not a number`;
  const n = Number(text);
  if (n === 0) return `learner id '${shown}' is zero (ids are positive)`;
  if (!Number.isSafeInteger(n)) return `learner id '${shown}' is past 2^53-1, the largest id that is exact`;
  return n;
}

/** Detects a UTF-16 byte order mark and decodes to UTF-8; UTF-8 (with or without BOM) passes through. */
class Utf16Decoder extends Transform {
  #decoder: TextDecoder | null | undefined = undefined;
  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    if (this.#decoder === undefined) {
      if (chunk[0] === 0xff && chunk[1] === 0xfe) this.#decoder = new TextDecoder('utf-16le');
      else if (chunk[0] === 0xfe && chunk[1] === 0xff) this.#decoder = new TextDecoder('utf-16be');
      else this.#decoder = null;
    }
    if (this.#decoder === null) return done(null, chunk);
    done(null, Buffer.from(this.#decoder.decode(chunk, { stream: true }), 'utf8'));
  }
  override _flush(done: TransformCallback): void {
    if (this.#decoder) {
      const rest = this.#decoder.decode();
      if (rest) this.push(Buffer.from(rest, 'utf8'));
    }
    done();
  }
}

export async function fileSize(file: string): Promise<number> {
  try {
    return (await stat(file)).size;
  } catch (err) {
    throw new LearnerTransferError(
      'LT_INPUT_UNREADABLE',
      `${file}: cannot be read (${(err as Error).message})`,
      { cause: err },
    );
  }
}

/** Yields every row and reject of a CSV file in order. Throws only when the file cannot be read at all. */
export async function* readCsv(options: CsvSourceOptions): AsyncGenerator<CsvEvent> {
  const { file } = options;
  const size = await fileSize(file);
  if (size === 0) {
    throw new LearnerTransferError(
      'LT_INPUT_INVALID',
      `${file}: the file is empty (expected learner ids, one per line)`,
    );
  }
  const input = createReadStream(file);
  let bytes = 0;
  input.on('data', (chunk) => {
    bytes += chunk.length;
    options.onBytes?.(bytes);
  });
  const skipped: CsvEvent[] = [];
  const parser = parse({
    bom: true,
    skip_empty_lines: true,
    relax_column_count: true,
    relax_quotes: true,
    trim: true,
    info: true,
    raw: true,
    max_record_size: options.maxRecordBytes ?? 64 * 1024,
    skip_records_with_error: true,
    on_skip: (err: CsvError | undefined, raw: string | undefined) => {
      const e = err as (CsvError & { lines?: number }) | undefined;
      skipped.push({
        kind: 'reject',
        line: e?.lines ?? 0,
        reason: `unreadable CSV record: ${(e?.message ?? 'parse error').replace(/\s+/g, ' ').slice(0, 200)}`,
        raw: (raw ?? '').slice(0, 200),
      });
      return undefined;
    },
  });
  input.on('error', (err) => parser.destroy(err));
  input.pipe(new Utf16Decoder()).pipe(parser);

  let idCol = 0;
  let orgCol = -1;
  let first = true;
  for await (const rec of parser as AsyncIterable<{
    record: string[];
    info: { lines: number };
    raw: string;
  }>) {
    while (skipped.length > 0) yield skipped.shift() as CsvEvent;
    const cells = rec.record;
    const line = rec.info.lines;
    if (first) {
      first = false;
      const norm = cells.map((c) => c.trim().toLowerCase());
      const found = norm.findIndex((c) => ID_HEADERS.has(c));
      if (found >= 0) {
        idCol = found;
        orgCol = norm.findIndex((c) => ORG_HEADERS.has(c));
        continue;
      }
      if (typeof parseLearnerId(cells[0]) !== 'number' && !/^\s*[+-]?\d/.test(cells[0] ?? '')) {
        const shownCells = cells
          .slice(0, 5)
          .map((c) => `'${c.slice(0, 30)}'`)
          .join(', ');
        throw new LearnerTransferError(
          'LT_INPUT_INVALID',
          `${file}:${line}: no learner id column: the header must name one of learnerId, learner_id or id ` +
            `(any case); found ${shownCells || 'nothing'}`,
        );
      }
      // No header: the first column holds the ids and this line is data.
    }
    const raw = rec.raw.replace(/\r?\n$/, '').slice(0, 200);
    const id = parseLearnerId(cells[idCol]);
    if (typeof id === 'string') {
      yield { kind: 'reject', line, reason: id, raw };
      continue;
    }
    const orgCell = orgCol >= 0 ? (cells[orgCol] ?? '').trim() : '';
    const org = orgCell || options.defaultOrg || '';
    if (!org) {
      yield { kind: 'reject', line, reason: 'no organization: give --org or fill the org column', raw };
      continue;
    }
    if (!isValidOrgKey(org) || !options.knownOrgs.includes(org)) {
      yield {
        kind: 'reject',
        line,
        reason: `organization '${org.slice(0, 64)}' has no token in LEARNER_API_TOKENS`,
        raw,
      };
      continue;
    }
    yield { kind: 'row', line, learnerId: id, org };
  }
  while (skipped.length > 0) yield skipped.shift() as CsvEvent;
}
