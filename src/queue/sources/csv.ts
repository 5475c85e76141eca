// The CSV source: streams a file of learner ids and yields valid rows and rejects with their line
// numbers. A line without a quote is cut at its commas here; only quoted lines go to csv-parse
// (docs/benchmarks.md).
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { Transform, type TransformCallback } from 'node:stream';
import { TextDecoder } from 'node:util';
import type { CsvError } from 'csv-parse';
import { parse as parseSync } from 'csv-parse/sync';
import { LearnerTransferError } from '../../core/errors.ts';
import { parseLearnerId } from '../../core/ids.ts';
import { isValidOrgKey } from '../../core/keys.ts';

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
  /**
   * Whether a thrown error may quote the file's cells (default true: an operator at a terminal). A
   * scheduled reconcile says false: its error goes to Redis, so it names only the file, line and problem.
   */
  quoteCells?: boolean | undefined;
  /** Told once, when the first record says where the ids and organizations are (-1: no org column). */
  onColumns?: (columns: Columns) => void;
}

const ID_HEADERS = new Set(['learnerid', 'learner_id', 'id']);
const DEFAULT_MAX_RECORD_BYTES = 64 * 1024;

/** Text for a message on a terminal: control characters (escape sequences, NULs) shown as \xNN. */
export function printable(text: string, max = 40): string {
  const cut = text.length > max ? `${text.slice(0, max - 3)}...` : text;
  // eslint-disable-next-line no-control-regex -- matching control characters is the point
  return cut.replace(/[\u0000-\u001f\u007f-\u009f\ufffd]/g, (c) =>
    c === '\ufffd' ? '?' : `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`,
  );
}
const ORG_HEADERS = new Set(['org', 'organization', 'org_key', 'orgkey']);

/** Checks one learner id cell (core/ids.ts): the id, or why it is not one. */
function parseLearnerIdCell(cell: string | undefined): number | string {
  const text = (cell ?? '').trim();
  return parseLearnerId(text, printable(text));
}

/** Decodes UTF-16 (by its byte order mark) to UTF-8; UTF-8 passes through. */
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

/**
 * One record per line, so each line is checked first: one longer than `max` bytes, with a NUL byte, or
 * with an unclosed quote becomes a marker line readCsv rejects on its own (an unclosed quote would
 * swallow every following line). A quoted cell spanning lines is rejected: no id file needs one.
 *
 * Every line leaves with a `\n`, whatever break it came with (as a spreadsheet counts them): csv-parse
 * takes its delimiter from the first line, and a mixed file would merge two lines.
 */
class LineGuard extends Transform {
  #parts: Buffer[] = [];
  #len = 0;
  #head: Buffer[] = [];
  #headLen = 0;
  /** The last chunk ended in \r: a \n first in the next one belongs to it. */
  #afterCr = false;
  readonly #max: number;
  constructor(max: number) {
    super();
    this.#max = max;
  }
  #take(part: Buffer, copy: boolean): void {
    if (this.#headLen < 200) {
      const h = part.subarray(0, 200 - this.#headLen);
      this.#head.push(Buffer.from(h));
      this.#headLen += h.length;
    }
    this.#len += part.length;
    if (this.#len <= this.#max) this.#parts.push(copy ? Buffer.from(part) : part);
    else this.#parts = [];
  }
  #endLine(): Buffer {
    const len = this.#len;
    const line = len > this.#max ? undefined : Buffer.concat(this.#parts);
    const head = Buffer.concat(this.#head).toString('utf8');
    this.#parts = [];
    this.#head = [];
    this.#len = 0;
    this.#headLen = 0;
    let problem: string | undefined;
    if (!line) problem = `overlong:${len}`;
    else if (line.includes(0)) problem = 'nul';
    else if (line.includes(0x22)) {
      const text = line.toString('utf8');
      const quotes = text.split('"').length - 1;
      if (quotes % 2 === 1 && /(^|,)\s*"/.test(text)) problem = 'quote';
    }
    if (!problem) return line as Buffer;
    // NUL bytes never pass the guard, so no file can forge this marker.
    const [kind, arg = ''] = problem.split(':');
    const b64 = Buffer.from(head).toString('base64');
    return Buffer.from(`${MARKER}${kind}:${arg}:${b64}`);
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    const out: Buffer[] = [];
    let start = 0;
    if (chunk.length === 0) return done();
    // The \n of a \r\n split across two chunks.
    if (this.#afterCr && chunk[0] === 0x0a) start = 1;
    this.#afterCr = false;
    // Where the next \n and the next \r are (chunk.length: none), each searched again only once passed:
    // searching for both at every line would rescan a chunk without any \r to its end once per line.
    let nl = -1;
    let cr = -1;
    while (start < chunk.length) {
      if (nl < start) nl = indexOrEnd(chunk, 0x0a, start);
      if (cr < start) cr = indexOrEnd(chunk, 0x0d, start);
      const end = Math.min(nl, cr);
      if (end === chunk.length) {
        this.#take(chunk.subarray(start), true);
        break;
      }
      this.#take(chunk.subarray(start, end), false);
      out.push(this.#endLine(), NEWLINE);
      start = end + 1;
      if (end === cr) {
        if (start === chunk.length) this.#afterCr = true;
        else if (chunk[start] === 0x0a) start++;
      }
    }
    done(null, out.length > 0 ? Buffer.concat(out) : undefined);
  }
  override _flush(done: TransformCallback): void {
    if (this.#len > 0) this.push(this.#endLine());
    done();
  }
}

function indexOrEnd(chunk: Buffer, byte: number, from: number): number {
  const i = chunk.indexOf(byte, from);
  return i === -1 ? chunk.length : i;
}

const MARKER = '\u0000lt-guard:';
const NEWLINE = Buffer.from('\n');

/** The reject for a marker line, or undefined for a normal record. */
function guardReject(cell: string | undefined, line: number, max: number): CsvEvent | undefined {
  if (!cell?.startsWith(MARKER)) return undefined;
  const [kind = '', arg = '', b64 = ''] = cell.slice(MARKER.length).split(':');
  const raw = Buffer.from(b64, 'base64').toString('utf8');
  const reason =
    kind === 'overlong'
      ? `line is ${arg} bytes long, more than the ${max} bytes a row may have`
      : kind === 'nul'
        ? 'line holds NUL bytes: binary data, or UTF-16 text without a byte order mark'
        : 'a quote opens a cell and does not close on this line';
  return { kind: 'reject', line, reason, raw: kind === 'nul' ? printable(raw, 200) : raw };
}

export async function fileSize(file: string): Promise<number> {
  try {
    const st = await stat(file);
    if (!st.isFile()) {
      throw new LearnerTransferError('LT_INPUT_UNREADABLE', `${file}: cannot be read (not a regular file)`);
    }
    return st.size;
  } catch (err) {
    if (err instanceof LearnerTransferError) throw err;
    throw new LearnerTransferError(
      'LT_INPUT_UNREADABLE',
      `${file}: cannot be read (${(err as Error).message})`,
      { cause: err },
    );
  }
}

/** Yields every row and reject of a CSV file in order; throws only when it cannot be read at all. */
export async function* readCsv(options: CsvSourceOptions): AsyncGenerator<CsvEvent> {
  const { file } = options;
  const size = await fileSize(file);
  if (size === 0) {
    throw new LearnerTransferError(
      'LT_INPUT_INVALID',
      `${file}: the file is empty (expected learner ids, one per line)`,
    );
  }
  const maxRecord = options.maxRecordBytes ?? DEFAULT_MAX_RECORD_BYTES;
  let columns: Columns = { idCol: 0, orgCol: -1 };
  let first = true;
  let line = 0;
  for await (const text of guardedLines(options, maxRecord)) {
    line++;
    // The byte order mark (UTF-8, or UTF-16 decoded to it) is not part of the first cell.
    const lineText = line === 1 && text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
    // csv-parse's skip_empty_lines with trim: a line empty or of blanks only is no record.
    if (lineText.trim() === '') continue;
    const guarded = guardReject(lineText, line, maxRecord);
    if (guarded) {
      yield guarded;
      continue;
    }
    const cells = cellsOf(lineText);
    if (typeof cells === 'string') {
      yield { kind: 'reject', line, reason: cells, raw: lineText.slice(0, 200) };
      continue;
    }
    if (cells.length === 0) continue;
    if (first) {
      first = false;
      const header = headerColumns(cells, line, options);
      options.onColumns?.(header ?? columns);
      if (header) {
        columns = header;
        continue;
      }
      // No header: the first column holds the ids and this line is data.
    }
    yield rowEvent(cells, lineText, line, columns, options);
  }
}

/**
 * The trimmed cells of one line, or why csv-parse could not read it. A line without a quote is cut at
 * its commas (what csv-parse makes of it too); one with a quote is csv-parse's, as it always was.
 */
function cellsOf(text: string): string[] | string {
  if (!text.includes('"')) return text.split(',').map((c) => c.trim());
  let problem: string | undefined;
  const records = parseSync(text, {
    record_delimiter: '\n',
    skip_empty_lines: true,
    relax_column_count: true,
    relax_quotes: true,
    trim: true,
    skip_records_with_error: true,
    on_skip: (err: CsvError | undefined) => {
      problem ??= `unreadable CSV record: ${(err?.message ?? 'parse error').replace(/\s+/g, ' ').slice(0, 200)}`;
      return undefined;
    },
  }) as string[][];
  if (problem !== undefined) return problem;
  return records.flat();
}

/**
 * The file's lines, through the UTF-16 decoder and the line guard: each line one string, without its
 * ending. The guard hands on whole lines only (every chunk ends with one, but for the last line of a
 * file without a final line break), so a chunk decodes on its own.
 */
async function* guardedLines(options: CsvSourceOptions, maxRecord: number): AsyncGenerator<string> {
  const input = createReadStream(options.file);
  let bytes = 0;
  input.on('data', (chunk) => {
    bytes += chunk.length;
    options.onBytes?.(bytes);
  });
  const guard = new LineGuard(maxRecord);
  input.on('error', (err) => guard.destroy(err));
  input.pipe(new Utf16Decoder()).pipe(guard);
  try {
    for await (const chunk of guard as AsyncIterable<Buffer>) {
      const text = chunk.toString('utf8');
      let start = 0;
      for (;;) {
        const end = text.indexOf('\n', start);
        if (end === -1) {
          if (start < text.length) yield text.slice(start);
          break;
        }
        yield text.slice(start, end);
        start = end + 1;
      }
    }
  } catch (err) {
    // A read error mid-file (EISDIR, EIO): a message for the operator, not a stack trace.
    throw new LearnerTransferError(
      'LT_INPUT_UNREADABLE',
      `${options.file}: cannot be read (${printable((err as Error).message, 200)})`,
      { cause: err },
    );
  } finally {
    input.destroy();
  }
}

/**
 * Whether the file names an organization column, read from its first record only (the rest is not
 * read). A file that cannot be read, or has no learner id column, throws as readCsv does.
 */
export async function hasOrgColumn(file: string): Promise<boolean> {
  let found: Columns | undefined;
  for await (const _ of readCsv({ file, knownOrgs: [], onColumns: (c) => (found = c) })) {
    if (found) break;
  }
  return (found?.orgCol ?? -1) >= 0;
}

/** Where the learner id and the organization are (-1: no organization column). */
export interface Columns {
  idCol: number;
  orgCol: number;
}

/**
 * The columns a header line names, or undefined when the first line is data (it starts with a number).
 * A first line that is neither is refused: the file is not a list of learner ids.
 */
function headerColumns(cells: string[], line: number, options: CsvSourceOptions): Columns | undefined {
  const norm = cells.map((c) => c.trim().toLowerCase());
  const found = norm.findIndex((c) => ID_HEADERS.has(c));
  if (found >= 0) return { idCol: found, orgCol: norm.findIndex((c) => ORG_HEADERS.has(c)) };
  if (typeof parseLearnerIdCell(cells[0]) !== 'number' && !/^\s*[+-]?\d/.test(cells[0] ?? '')) {
    const shownCells = cells
      .slice(0, 5)
      .map((c) => `'${printable(c, 30)}'`)
      .join(', ');
    throw new LearnerTransferError(
      'LT_INPUT_INVALID',
      `${options.file}:${line}: no learner id column: the header must name one of learnerId, learner_id or id ` +
        `(any case); found ${
          options.quoteCells === false
            ? `${cells.length} cell(s), none of them a learner id or a header (contents not shown)`
            : shownCells || 'nothing'
        }`,
    );
  }
  return undefined;
}

/** A data line: its learner and organization, or why it is rejected. */
function rowEvent(
  cells: readonly string[],
  text: string,
  line: number,
  columns: Columns,
  options: CsvSourceOptions,
): CsvEvent {
  const raw = text.slice(0, 200);
  const id = parseLearnerIdCell(cells[columns.idCol]);
  if (typeof id === 'string') return { kind: 'reject', line, reason: id, raw };
  const orgCell = columns.orgCol >= 0 ? (cells[columns.orgCol] ?? '').trim() : '';
  const org = orgCell || options.defaultOrg || '';
  if (!org)
    return { kind: 'reject', line, reason: 'no organization: give --org or fill the org column', raw };
  if (!isValidOrgKey(org) || !options.knownOrgs.includes(org)) {
    return {
      kind: 'reject',
      line,
      reason: `organization '${printable(org, 64)}' has no token in LEARNER_API_TOKENS`,
      raw,
    };
  }
  return { kind: 'row', line, learnerId: id, org };
}
