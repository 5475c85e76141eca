// The order of a run's files (test/helpers/file-order.ts, which the suite's sequencer uses) and the table
// it reads (scripts/test-durations.ts, from a run's JSON report).
import { describe, expect, it } from 'vitest';
import { durationsOf } from '../../scripts/test-durations.ts';
import { chainDurations, compareFiles, type FileToOrder } from '../helpers/file-order.ts';

const f = (file: string, project: string, phase: number, size = 100, isolated = true): FileToOrder => ({
  file,
  project,
  phase,
  isolated,
  size,
});

describe('the order of a run', () => {
  it('keeps the phases; in each the longest first, an unknown file before them, shared files last', () => {
    const durations = { 'a.ts': 10, 'b.ts': 70, 'c.ts': 30, 'u1.ts': 2, 'u2.ts': 12, 's.ts': 90, 'z.ts': 5 };
    const files = [
      f('s.ts', 'system', 1),
      f('a.ts', 'integration', 0),
      f('u1.ts', 'unit', 0, 100, false),
      f('new-small.ts', 'e2e', 0, 10),
      f('b.ts', 'e2e', 0),
      f('z.ts', 'later', 2),
      f('u2.ts', 'unit', 0, 100, false),
      f('new-big.ts', 'integration', 0, 900),
      f('c.ts', 'integration', 0),
    ];
    expect(files.sort(compareFiles(durations)).map((x) => x.file)).toEqual([
      'new-big.ts',
      'new-small.ts',
      'b.ts',
      'c.ts',
      'a.ts',
      'u2.ts',
      'u1.ts',
      's.ts',
      'z.ts',
    ]);
  });

  it('places a chain of one-at-a-time files by what is left of it, its longest file first', () => {
    const durations = {
      'long.ts': 80,
      'mid.ts': 40,
      'm2.ts': 30,
      'c1.ts': 25,
      'c2.ts': 20,
      'c3.ts': 15,
      'short.ts': 10,
    };
    const chained = (file: string): FileToOrder => ({ ...f(file, 'serial', 1), chained: true });
    const files = [
      f('short.ts', 'system', 1),
      chained('c3.ts'),
      f('mid.ts', 'system', 1),
      f('m2.ts', 'system', 1),
      chained('c1.ts'),
      f('long.ts', 'system', 1),
      chained('c2.ts'),
      { ...f('c-new.ts', 'serial', 1), chained: true },
    ];
    const table = chainDurations(durations, files);
    // 25 + 20 + 15: the chain is as long as its three known files; then 20 + 15, then 15. The table itself
    // is left as it was.
    expect([table['c1.ts'], table['c2.ts'], table['c3.ts']]).toEqual([60, 35, 15]);
    expect(durations['c1.ts']).toBe(25);
    expect(files.sort(compareFiles(table)).map((x) => x.file)).toEqual([
      'c-new.ts',
      'long.ts',
      'c1.ts',
      'mid.ts',
      // the chain's second file (35 left) before a longer file of the phase (30): queued while c1 runs
      'c2.ts',
      'm2.ts',
      'c3.ts',
      'short.ts',
    ]);
  });

  it('reads the table from a JSON report: seconds per file, relative, the longest first', () => {
    const report = {
      testResults: [
        { name: '/repo/test/unit/a.test.ts', startTime: 1000, endTime: 1440 },
        { name: '/repo/test/chaos/b.test.ts', startTime: 1000, endTime: 73_210 },
      ],
    };
    const table = durationsOf(report, '/repo');
    expect(table).toEqual({ 'test/chaos/b.test.ts': 72.2, 'test/unit/a.test.ts': 0.4 });
    expect(Object.keys(table)).toEqual(['test/chaos/b.test.ts', 'test/unit/a.test.ts']);
  });
});
