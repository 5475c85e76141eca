// Line endings that cannot lose a row: CRLF, LF, bare-CR and mixed files, each with a
// line the guard refuses (NUL bytes, over 64 KiB, an unclosed quote) first, in the middle and last. Every
// valid row is read and enqueued, and every reject names the line a spreadsheet shows it on: `\r\n`, `\n`
// and a bare `\r` each end one line. The reader is called in-process, then enqueue (real Redis).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newRunId } from '../../src/outcomes/runs.ts';
import { enqueueCsv } from '../../src/queue/enqueue-csv.ts';
import { readCsv, type CsvEvent } from '../../src/queue/sources/csv.ts';
import { startHarness, type Harness } from '../helpers/pipeline.ts';

const ENDINGS = {
  crlf: ['\r\n'],
  lf: ['\n'],
  cr: ['\r'],
  // Line i ends with the (i mod 3)th: a file edited on two systems.
  mixed: ['\r\n', '\n', '\r'],
} as const;
type Ending = keyof typeof ENDINGS;

const REFUSED = {
  nul: { text: (id: number) => `${id}\u0000`, reason: 'line holds NUL bytes' },
  overlong: { text: (id: number) => `${id}${'7'.repeat(70_000)}`, reason: 'bytes long, more than the 65536' },
  quote: { text: (id: number) => `"${id},acme`, reason: 'a quote opens a cell and does not close' },
} as const;
type Refused = keyof typeof REFUSED;

const POSITIONS = ['first', 'middle', 'last', 'last, no final line ending'] as const;
type Position = (typeof POSITIONS)[number];

interface Fixture {
  name: string;
  body: string;
  /** Valid learner id -> its line (1 is the header). */
  valid: Map<number, number>;
  /** The refused line's number. */
  refusedLine: number;
  reason: string;
}

let nextId = 1000;

function fixture(ending: Ending, kind: Refused, position: Position): Fixture {
  const data: (number | 'refused')[] = [nextId++, nextId++, nextId++, nextId++, nextId++];
  const at = position === 'first' ? 0 : position === 'middle' ? 2 : data.length;
  data.splice(at, 0, 'refused');
  const refusedId = nextId++;
  const lines = [
    'learnerId',
    ...data.map((d) => (d === 'refused' ? REFUSED[kind].text(refusedId) : String(d))),
  ];
  const ends = ENDINGS[ending];
  let body = '';
  lines.forEach((line, i) => {
    const last = i === lines.length - 1;
    body +=
      line + (last && position === 'last, no final line ending' ? '' : (ends[i % ends.length] as string));
  });
  const valid = new Map<number, number>();
  data.forEach((d, i) => {
    if (d !== 'refused') valid.set(d, i + 2);
  });
  return {
    name: `${ending}-${kind}-${position.replace(/\W+/g, '-')}.csv`,
    body,
    valid,
    refusedLine: at + 2,
    reason: REFUSED[kind].reason,
  };
}

const FIXTURES: Fixture[] = [];
for (const ending of Object.keys(ENDINGS) as Ending[])
  for (const kind of Object.keys(REFUSED) as Refused[])
    for (const position of POSITIONS) FIXTURES.push(fixture(ending, kind, position));

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ tag: 'line-endings' });
});
afterAll(async () => {
  await h?.close();
});

async function events(file: string): Promise<CsvEvent[]> {
  const out: CsvEvent[] = [];
  for await (const ev of readCsv({ file, defaultOrg: 'acme', knownOrgs: ['acme'] })) out.push(ev);
  return out;
}

describe('the CSV reader keeps every row and its true line, whatever the line endings', () => {
  it.each(FIXTURES.map((f) => [f.name, f] as const))('%s', async (_name, f) => {
    const file = h.writeFile(f.name, f.body);
    const evs = await events(file);
    const rows = evs.filter((e) => e.kind === 'row');
    const rejects = evs.filter((e) => e.kind === 'reject');
    expect(new Map(rows.map((r) => [r.learnerId, r.line]))).toEqual(f.valid);
    expect(rejects.map((r) => r.line)).toEqual([f.refusedLine]);
    expect(rejects[0]?.reason).toContain(f.reason);
  });
});

describe('enqueue --csv enqueues every valid row and names the true line of the refused one', () => {
  it.each(FIXTURES.map((f) => [f.name, f] as const))('%s', async (_name, f) => {
    const file = h.writeFile(f.name, f.body);
    const runId = newRunId();
    await h.ctx.runs.create({ id: runId, kind: 'csv', source: f.name, orgs: ['acme'] });
    const rejectsFile = join(h.dir, `${f.name}.rejects`);
    const told: number[] = [];
    const s = await enqueueCsv(
      { producer: h.ctx.producer, runs: h.ctx.runs },
      {
        file,
        defaultOrg: 'acme',
        knownOrgs: h.config.orgs,
        runId,
        rejectsFile,
        onReject: (line) => told.push(line),
      },
    );
    expect({ read: s.read, valid: s.valid, enqueued: s.enqueued, rejected: s.rejected }).toEqual({
      read: f.valid.size + 1,
      valid: f.valid.size,
      enqueued: f.valid.size,
      rejected: 1,
    });
    expect(told).toEqual([f.refusedLine]);
    const rejectLines = readFileSync(rejectsFile, 'utf8').trim().split('\n').slice(1);
    expect(rejectLines).toHaveLength(1);
    expect(rejectLines[0]).toMatch(new RegExp(`^${f.refusedLine},`));
    for (const [id, line] of f.valid) {
      const rec = await h.ctx.store.get('acme', id);
      expect({ bucket: rec?.b, source: rec?.src }, `learner ${id}`).toEqual({
        bucket: 'queued',
        source: `${f.name}:${line}`,
      });
    }
  });
});

describe('line breaks a spreadsheet counts', () => {
  it('a bare \\r inside a CRLF or LF file ends a line, and later lines keep their numbers', async () => {
    for (const eol of ['\r\n', '\n']) {
      const file = h.writeFile('bare-cr.csv', `learnerId${eol}1${eol}2\rX${eol}3${eol}4${eol}`);
      const evs = await events(file);
      expect(evs.map((e) => (e.kind === 'row' ? [e.line, e.learnerId] : [e.line, e.raw]))).toEqual([
        [2, 1],
        [3, 2],
        [4, 'X'],
        [5, 3],
        [6, 4],
      ]);
    }
  });

  it('an empty line counts, whatever its ending', async () => {
    const file = h.writeFile('empty-lines.csv', 'learnerId\r\n\r\n1\n\n2\r\rX\r\n3\r\n');
    const evs = await events(file);
    expect(evs.map((e) => [e.line, e.kind])).toEqual([
      [3, 'row'],
      [5, 'row'],
      [7, 'reject'],
      [8, 'row'],
    ]);
  });

  it('a \\r\\n split across two reads of the file is one line break', async () => {
    // The file is read in 64 KiB chunks: pad the second data line so its \r is the last byte of the first
    // chunk and its \n the first of the next.
    const head = 'learnerId\r\n1\r\n';
    const pad = 65_536 - 1 - head.length - 1;
    const body = `${head}${' '.repeat(pad)}2\r\n3\r\nX\r\n4\r\n`;
    expect(body.charCodeAt(65_535)).toBe(0x0d);
    const file = h.writeFile('split-crlf.csv', body);
    const evs = await events(file);
    expect(evs.map((e) => [e.line, e.kind === 'row' ? e.learnerId : e.raw])).toEqual([
      [2, 1],
      [3, 2],
      [4, 3],
      [5, 'X'],
      [6, 4],
    ]);
  });
});
