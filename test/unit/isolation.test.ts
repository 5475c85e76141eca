// The unit, integration and e2e projects run without isolation (vitest.config.ts: one process runs file
// after file of its project, with the modules it loaded once). That is only sound while no file leaves
// anything behind for the next: a mocked module, a stubbed global or environment variable, a changed
// process.env, a working directory, fake timers left on. This reads every file of theirs and fails naming
// the one that does (the browser and fairness files, in e2e/, run in the system project, a process each).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');
const DIRS = ['test/unit', 'test/model', 'test/integration', 'test/security', 'test/e2e'];

const FORBIDDEN: [RegExp, string][] = [
  [/\bvi\.(?:mock|doMock|stubEnv|stubGlobal|hoisted)\(/, 'mocks a module or stubs a global'],
  [
    /\bprocess\.env(?:\.\w+|\[[^\]]+\])?\s*(?:\?\?|\|\||&&|\+)?=[^=]|\bdelete\s+process\.env\b/,
    'changes process.env',
  ],
  [/\bglobalThis\.\w+\s*=[^=]|\bprocess\.exitCode\s*=[^=]/, 'sets a global'],
  [/\bprocess\.chdir\(/, 'changes the working directory'],
  [/\bObject\.assign\(\s*process\.env\b/, 'changes process.env'],
];

function files(): string[] {
  return DIRS.flatMap((dir) =>
    readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
      .filter((name) => name.endsWith('.ts') && !/-browser\.test\.ts$/.test(name))
      .map((name) => `${dir}/${name.split('\\').join('/')}`),
  );
}

describe('the files of the shared projects can share one process', () => {
  it('none mocks a module, stubs a global or changes the environment or the working directory', () => {
    const found = files().flatMap((file) => {
      const text = readFileSync(join(ROOT, file), 'utf8').replace(/^\s*\/\/.*$/gm, '');
      return FORBIDDEN.filter(([re]) => re.test(text)).map(([, what]) => `${file} ${what}`);
    });
    expect(found.filter((f) => !f.startsWith('test/unit/isolation.test.ts'))).toEqual([]);
  });

  it('a file that turns fake timers on turns them off again after each test', () => {
    const found = files().filter((file) => {
      const text = readFileSync(join(ROOT, file), 'utf8');
      return (
        /\bvi\.useFakeTimers\(/.test(text) && !/after(?:Each|All)\([^]*?vi\.useRealTimers\(\)/.test(text)
      );
    });
    expect(found).toEqual([]);
  });

  it('holds itself to it: a file that mocks a module is named', () => {
    const text = "vi.mock('../../src/log.ts');\nprocess.env.X = '1';";
    expect(FORBIDDEN.filter(([re]) => re.test(text)).map(([, w]) => w)).toEqual([
      'mocks a module or stubs a global',
      'changes process.env',
    ]);
    const cases: [string, string][] = [
      ["process.env.X ??= '1';", 'changes process.env'],
      ["process.env['X'] += 'y';", 'changes process.env'],
      ['process.env = {};', 'changes process.env'],
      ['globalThis.fetch = myFetch;', 'sets a global'],
      ['process.exitCode = 1;', 'sets a global'],
    ];
    for (const [line, what] of cases) {
      expect(
        FORBIDDEN.filter(([re]) => re.test(line)).map(([, w]) => w),
        line,
      ).toEqual([what]);
    }
    expect(FORBIDDEN.filter(([re]) => re.test('if (process.env.X === "1") {}'))).toEqual([]);
  });
});
