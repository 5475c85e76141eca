// The CSV source cuts plain lines itself and gives csv-parse only the lines with a quote: every line is
// still one record with its own line number, and a line whose quote csv-parse cannot close costs only
// that line (the line after it is read, not swallowed into the bad one).
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readCsv, type CsvEvent } from '../../src/queue/sources/csv.ts';

async function read(text: string | Buffer): Promise<CsvEvent[]> {
  const file = join(mkdtempSync(join(tmpdir(), 'lt-csv-lines-')), 'ids.csv');
  writeFileSync(file, text);
  const out: CsvEvent[] = [];
  for await (const ev of readCsv({ file, defaultOrg: 'acme', knownOrgs: ['acme', 'beta'] })) out.push(ev);
  return out;
}

const rows = (evs: CsvEvent[]) =>
  evs.flatMap((e) => (e.kind === 'row' ? [[e.line, e.learnerId, e.org] as const] : []));
const rejects = (evs: CsvEvent[]) =>
  evs.flatMap((e) => (e.kind === 'reject' ? [[e.line, e.raw] as const] : []));

describe('CSV lines', () => {
  it('plain and quoted cells, empty lines, CRLF and a BOM: each row with its own line', async () => {
    const evs = await read(
      '\ufefflearnerId , org\r\n 11 ,beta\r\n\r\n"12",acme\r\n13\r\n  \r\n"1""4",acme\n15,"beta"',
    );
    expect(rows(evs)).toEqual([
      [2, 11, 'beta'],
      [4, 12, 'acme'],
      [5, 13, 'acme'],
      [8, 15, 'beta'],
    ]);
    // A line of blanks is skipped like an empty one; a quote inside an id is not an id.
    expect(rejects(evs).map(([line]) => line)).toEqual([7]);
  });

  it('a quote csv-parse cannot close costs its own line only', async () => {
    // Even quotes, so the line guard lets it through; the second opens a cell that never closes.
    const evs = await read('learnerId,org\n21,acme\n2"2,"beta\n23,acme\n24\n');
    expect(rows(evs)).toEqual([
      [2, 21, 'acme'],
      [4, 23, 'acme'],
      [5, 24, 'acme'],
    ]);
    const bad = evs.find((e) => e.kind === 'reject');
    expect(bad).toMatchObject({ kind: 'reject', line: 3, raw: '2"2,"beta' });
  });

  it('100,000 plain lines come out in order, numbered, with a last line that has no line break', async () => {
    const ids = Array.from({ length: 100_000 }, (_, i) => i + 1);
    const evs = await read(`learnerId\n${ids.join('\n')}`);
    const got = rows(evs);
    expect(got).toHaveLength(ids.length);
    expect(got[0]).toEqual([2, 1, 'acme']);
    expect(got.at(-1)).toEqual([100_001, 100_000, 'acme']);
    expect(got.every(([line, id]) => line === id + 1)).toBe(true);
  });
});
