// The package a user installs, as a user gets it: `npm pack` of this checkout (which builds dist/
// first), then `npm install -g` of the tarball into a prefix of its own. The tarball holds what
// runs (the compiled code, the Lua scripts, the dashboard's files, README) and no test, source or
// TypeScript toolchain; the installed `learner-transfer` answers and reads Redis. One pack per
// run, in beforeAll. The install resolves the dependencies from the npm cache, or from the
// registry when the cache lacks them.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.ts';
import { deletePrefix, newRedis, randomPrefix, REDIS_URL } from '../helpers/redis.ts';

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(command: string, args: string[], env: NodeJS.ProcessEnv, cwd: string): Promise<Run> {
  const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath, e.name)).split('\\').join('/'));
}

const work = mkdtempSync(join(tmpdir(), 'lt-package-'));
const prefixDir = join(work, 'global');
const installed = join(prefixDir, 'lib', 'node_modules', 'learner-transfer');
const redisPrefix = randomPrefix('package');
let tarball = '';
let contents: string[] = [];

beforeAll(async () => {
  const pack = await run('npm', ['pack', '--pack-destination', work], process.env, ROOT);
  expect(pack.code, pack.stderr).toBe(0);
  tarball = join(work, pack.stdout.trim().split('\n').at(-1) ?? '');
  const list = await run('tar', ['tzf', tarball], process.env, work);
  contents = list.stdout.trim().split('\n');
}, 300_000);

afterAll(async () => {
  const redis = newRedis();
  await deletePrefix(redis, redisPrefix);
  await redis.quit();
});

describe('the package', () => {
  it('holds the compiled code, its Lua scripts and public files, README, and nothing of the checkout', () => {
    const src = filesUnder(join(ROOT, 'src'));
    const assets = src.filter((f) => f.endsWith('.lua') || f.includes('/public/'));
    expect(assets.length).toBeGreaterThan(20);
    const expected = [
      'package/package.json',
      'package/README.md',
      'package/bin/learner-transfer.js',
      'package/bin/package.json',
      'package/jobs.example.csv',
      'package/dist/cli/start.cjs',
      'package/dist/cli/warm.cjs',
      'package/dist/cli/main.cjs',
      'package/dist/vendor/commander.cjs',
      ...assets.map((f) => `package/dist/${f}`),
    ];
    // The rest of the code is the commands' bundle (scripts/compile.mjs): a file for each command in cli/
    // (named after it and a hash) and the chunks they share, and nothing else.
    const chunks = contents.filter((f) => /^package\/dist\/(?:cli\/[a-z-]+-|chunks\/)[\w-]+\.cjs$/.test(f));
    expect(chunks.some((f) => /\/cli\/status-\w+\.cjs$/.test(f))).toBe(true);
    expect(chunks.some((f) => f.startsWith('package/dist/chunks/'))).toBe(true);
    expect(contents.filter((f) => !chunks.includes(f)).sort()).toEqual([...expected].sort());
  });

  it('needs no TypeScript toolchain to run', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
    };
    for (const tool of ['typescript', 'tsx', 'esbuild', 'vitest', '@types/node'])
      expect(Object.keys(pkg.dependencies)).not.toContain(tool);
  });

  it('npm install -g gives a learner-transfer that answers and reads Redis', async () => {
    const install = await run(
      'npm',
      ['install', '-g', '--prefix', prefixDir, '--prefer-offline', '--no-audit', '--no-fund', tarball],
      process.env,
      work,
    );
    expect(install.code, install.stderr).toBe(0);
    for (const tool of ['typescript', 'tsx', 'esbuild'])
      expect(existsSync(join(installed, 'node_modules', tool)), tool).toBe(false);
    const bin = join(prefixDir, 'bin', 'learner-transfer');
    const env = { PATH: process.env.PATH ?? '', HOME: work };
    const version = await run(bin, ['--version'], env, work);
    expect(version).toMatchObject({ code: 0, stdout: '0.1.0\n' });
    const help = await run(bin, ['--help'], env, work);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('Usage: learner-transfer [options] [command]');
    const status = await run(
      bin,
      ['status'],
      { ...env, REDIS_URL, QUEUE_PREFIX: redisPrefix, LEARNER_API_TOKENS: 'acme:package-test-token' },
      work,
    );
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(/^acme\n {2}learners: none yet$/m);
  }, 300_000);
});
