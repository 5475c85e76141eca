// `npm run test:repeat` (scripts/test-repeat.ts) on a fixture that fails on odd runs: the counts, the
// first failure's message and place, the exit code, and the CPU burners gone when it ends.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { addRun, newTally, parseArgs, summary } from '../../scripts/test-repeat.ts';

const ROOT = join(import.meta.dirname, '..', '..');
const FIXTURE = join('test', 'unit', 'fixtures', 'test-repeat');

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('test:repeat', () => {
  it('counts each test over the runs, shows the first failure, fails the exit and kills its burners', () => {
    const dir = mkdtempSync(join(tmpdir(), 'lt-repeat-test-'));
    try {
      const run = spawnSync(
        process.execPath,
        [
          'bin/run-ts.js',
          'scripts/test-repeat.ts',
          'flaky.fixture.ts',
          '--times',
          '2',
          '--load',
          '1',
          '--',
          '--root',
          FIXTURE,
        ],
        { cwd: ROOT, encoding: 'utf8', env: { ...process.env, REPEAT_FIXTURE_COUNTER: join(dir, 'n') } },
      );
      const out = run.stdout;
      expect(run.status, out + run.stderr).toBe(1);
      expect(out).toMatch(/^run 1\/2: FAILED \(exit 1\)/m);
      expect(out).toMatch(/^run 2\/2: passed/m);
      expect(out).toMatch(/^1\/2 passes on even runs$/m);
      expect(out).toMatch(/^2\/2 always passes$/m);
      expect(out).toContain('first failure of "passes on even runs" (passed 1/2):');
      expect(out).toContain('run 1 is odd');
      expect(out).toMatch(/flaky\.fixture\.ts:\d+:\d+/);
      expect(out).not.toContain('first failure of "always passes"');
      expect(out).toMatch(/^1\/2 runs passed$/m);
      const pids = (/^burners: (.*)$/m.exec(out)?.[1] ?? '').split(' ').map(Number);
      expect(pids).toHaveLength(1);
      for (const pid of pids) expect(alive(pid), `burner ${pid}`).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('reads its flags and names the one that is wrong', () => {
    expect(parseArgs(['a.test.ts', 'b.test.ts', '--times', '50', '--load', '2', '-t', 'x y'])).toEqual({
      files: ['a.test.ts', 'b.test.ts'],
      times: 50,
      load: 2,
      testName: 'x y',
      vitestArgs: [],
    });
    expect(parseArgs(['a.test.ts', '--times', '1', '--', '--root', 'r']).vitestArgs).toEqual(['--root', 'r']);
    expect(() => parseArgs(['a.test.ts'])).toThrow(/--times is required/);
    expect(() => parseArgs(['--times', '3'])).toThrow(/no test file given/);
    expect(() => parseArgs(['a.test.ts', '--times', '0'])).toThrow(
      /--times: expected a whole number >= 1, got "0"/,
    );
    expect(() => parseArgs(['a.test.ts', '--times', '2', '--load', 'two'])).toThrow(/--load: .* got "two"/);
    expect(() => parseArgs(['a.test.ts', '--times', '2', '--loud'])).toThrow(/unknown flag --loud/);
  });

  it('counts a run without a report, and a file that failed outside its tests', () => {
    const tally = newTally();
    addRun(tally, undefined, 1, 'Startup Error: boom');
    addRun(
      tally,
      {
        testResults: [
          { name: 'f.test.ts', status: 'failed', message: 'hook timed out', assertionResults: [] },
        ],
      },
      1,
      '',
    );
    addRun(tally, { testResults: [{ name: 'f.test.ts', status: 'passed', assertionResults: [] }] }, 0, '');
    const text = summary(tally);
    expect(text).toMatch(/^0\/1 \(run\)$/m);
    expect(text).toMatch(/^0\/1 f\.test\.ts \(outside its tests\)$/m);
    expect(text).toContain('Startup Error: boom');
    expect(text).toContain('hook timed out');
    expect(text).toMatch(/^1\/3 runs passed$/m);
  });
});
