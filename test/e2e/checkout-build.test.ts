// A checkout runs compiled JavaScript and never a stale build (scripts/checkout-build.cjs): its first
// start compiles src/ into node_modules/.cache, a later start runs that build (whose entry, with the
// command table, is one file: --help reads it and commander), and an edit is in the next start. In a copy of the checkout of its own (src/, bin/, scripts/, tsconfig.json; its
// node_modules links to this one's packages), so that its builds and their pruning touch nothing here.
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { ROOT, spawnNode, waitExit, type CliResult } from '../helpers/cli.ts';

const checkout = mkdtempSync(join(tmpdir(), 'lt-checkout-'));
const cache = join(checkout, 'node_modules', '.cache', 'learner-transfer');

beforeAll(() => {
  for (const part of ['src', 'bin', 'scripts', 'tsconfig.json', 'package.json', 'jobs.example.csv'])
    cpSync(join(ROOT, part), join(checkout, part), { recursive: true });
  mkdirSync(join(checkout, 'node_modules'));
  for (const name of readdirSync(join(ROOT, 'node_modules')).filter((n) => !n.startsWith('.')))
    symlinkSync(join(ROOT, 'node_modules', name), join(checkout, 'node_modules', name));
});

async function start(
  args: string[],
  env: Record<string, string> = {},
): Promise<Pick<CliResult, 'code' | 'stdout' | 'stderr'>> {
  const { code, stdout, stderr } = await waitExit(
    spawnNode(args, { PATH: process.env.PATH ?? '', HOME: checkout, ...env }),
  );
  return { code, stdout, stderr };
}

const version = () => start([join(checkout, 'bin', 'learner-transfer.js'), '--version']);
const builds = () => (existsSync(cache) ? readdirSync(cache).sort() : []);

describe('a checkout', () => {
  it('builds on its first start, reuses the build, and rebuilds after an edit', async () => {
    expect(await version()).toEqual({ code: 0, stdout: '0.1.0\n', stderr: '' });
    const first = builds();
    expect(first).toHaveLength(1);
    expect(existsSync(join(cache, first[0] ?? '', 'cli', 'start.cjs'))).toBe(true);
    // The Lua scripts and the dashboard's files are beside the compiled code.
    expect(existsSync(join(cache, first[0] ?? '', 'limiter', 'acquire.lua'))).toBe(true);
    expect(existsSync(join(cache, first[0] ?? '', 'dashboard', 'public', 'app.css'))).toBe(true);

    expect((await version()).stdout).toBe('0.1.0\n');
    expect(builds()).toEqual(first);

    // Its entry, the command table (one file) and commander (scripts/compile.mjs): --help reads them alone.
    const trace = join(checkout, 'trace');
    const help = await start(
      [
        '--import',
        join(ROOT, 'test', 'helpers', 'load-trace.mjs'),
        join(checkout, 'bin', 'learner-transfer.js'),
        '--help',
      ],
      { LT_LOAD_TRACE: trace },
    );
    expect(help.code).toBe(0);
    const loaded = readFileSync(trace, 'utf8')
      .split('\n')
      .filter((line) => line && !line.startsWith('node:'))
      .map((line) => line.replace(/^file:\/\//, ''));
    const ours = loaded.filter((f) => !f.includes('/node_modules/') || f.includes('/.cache/'));
    expect(new Set(ours)).toEqual(
      new Set([
        join(checkout, 'bin', 'learner-transfer.js'),
        join(checkout, 'scripts', 'checkout-build.cjs'),
        join(cache, first[0] ?? '', 'cli', 'start.cjs'),
        join(cache, first[0] ?? '', 'cli', 'main.cjs'),
        join(cache, first[0] ?? '', 'vendor', 'commander.cjs'),
      ]),
    );
    // No package from node_modules: commander is a file of the build.
    expect(loaded.filter((f) => f.includes('/node_modules/') && !f.includes('/.cache/'))).toEqual([]);

    // An edit of the same size: only the file's modification time tells it from the build's.
    const run = join(checkout, 'src', 'cli', 'run.ts');
    writeFileSync(run, readFileSync(run, 'utf8').replace(".version('0.1.0')", ".version('0.2.0')"));
    expect(await version()).toEqual({ code: 0, stdout: '0.2.0\n', stderr: '' });
    const second = builds();
    expect(second).toHaveLength(2);
    expect(second).toEqual(expect.arrayContaining(first));
  });
});
