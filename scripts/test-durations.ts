// Rewrites test/durations.json, the seconds each test file took, from the JSON report of a whole run:
//
//   CI=true npx vitest run --reporter=default --reporter=json --outputFile.json=/tmp/run.json
//   npm run test:durations -- /tmp/run.json
//
// test/helpers/sequencer.ts starts the longest files of each phase first by this table (docs/testing.md).
// Only the order depends on it: a stale or missing entry makes a run slower, never red.
import { readFileSync, writeFileSync } from 'node:fs';
import { relative, resolve } from 'node:path';

interface FileResult {
  name: string;
  startTime: number;
  endTime: number;
}

/** File (relative to root, with /) to its seconds, one decimal, the longest first. */
export function durationsOf(report: { testResults: FileResult[] }, root: string): Record<string, number> {
  const rows = report.testResults.map((f) => ({
    file: relative(root, f.name).split('\\').join('/'),
    seconds: Math.round((f.endTime - f.startTime) / 100) / 10,
  }));
  rows.sort((a, b) => b.seconds - a.seconds || (a.file < b.file ? -1 : 1));
  return Object.fromEntries(rows.map((r) => [r.file, r.seconds]));
}

if (process.argv[1] === import.meta.filename) {
  const [reportPath] = process.argv.slice(2);
  if (!reportPath) {
    process.stderr.write('usage: npm run test:durations -- REPORT.json (from vitest --reporter=json)\n');
    process.exit(2);
  }
  const report = JSON.parse(readFileSync(reportPath, 'utf8')) as { testResults: FileResult[] };
  const table = durationsOf(report, resolve('.'));
  writeFileSync('test/durations.json', `${JSON.stringify(table, null, 2)}\n`);
  process.stdout.write(`test/durations.json: ${Object.keys(table).length} files\n`);
}
