// `--help` answers at once because the command table loads no library but commander: each command
// imports its own file, and with it BullMQ, fastify, undici, OpenTelemetry..., only when it runs
// (docs/architecture.md, "The CLI"). This holds the table to it: the compiled CLI runs `--help`
// and every `COMMAND --help` under a trace of the modules it loads (test/helpers/load-trace.mjs),
// and each must stay within the list below.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/run.ts';
import { Cli } from '../../src/cli/io.ts';
import { builtInputs, packageOf } from '../helpers/cli-build.ts';
import { ROOT } from '../helpers/cli.ts';

/** The packages the table may load. */
const PACKAGES = ['commander'];

/**
 * The modules of src/ it may load (as compiled): the CLI's frame and its table, the flag parsers and the
 * light parts of core/ and of the layers whose rules the parsers apply (the kinds of limit and their run
 * window, a token id, the outcome codes that --status lists). Every command's entry in table/ is allowed.
 */
const MODULES = new Set([
  // The build's entry and what loads its CommonJS files (scripts/compile.mjs).
  'cli/bundle-loader.js',
  'cli/start.js',
  'cli/canary-flags.js',
  'cli/commands.js',
  'cli/help-env.js',
  'cli/io.js',
  'cli/live-line.js',
  'cli/main.js',
  'cli/parsers.js',
  'cli/program.js',
  'cli/run.js',
  'cli/signals.js',
  'core/burst.js',
  'core/duration.js',
  'core/error-codes.js',
  'core/errors.js',
  'core/halt-rule.js',
  'core/ids.js',
  'core/keys.js',
  'core/log-text.js',
  'core/terminal-safe.js',
  'core/token-file.js',
  'core/token-ref.js',
  'limiter/calendar.js',
  'limiter/kinds.js',
  'limiter/run-window-text.js',
  'limiter/run-window.js',
  'limiter/time-zone.js',
  'limiter/token-orgs.js',
  'outcomes/codes.js',
  'redis/refusals.js',
]);
const TABLE = /^cli\/table\/[a-z-]+\.js$/;

const MAIN = process.env.LT_TEST_CLI ?? '';
const TRACER = join(ROOT, 'test', 'helpers', 'load-trace.mjs');

/** Runs the compiled CLI with `args` under the trace; its exit code, output and what it loaded. */
async function traced(args: string[]): Promise<{ code: number | null; stdout: string; loaded: string[] }> {
  const trace = join(mkdtempSync(join(tmpdir(), 'lt-help-loads-')), 'trace');
  const child = spawn(process.execPath, ['--import', TRACER, MAIN, ...args], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', LT_LOAD_TRACE: trace },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  const loaded = readFileSync(trace, 'utf8')
    .split('\n')
    .filter((line) => line && !line.startsWith('node:'))
    .map((line) => (line.startsWith('file:') ? fileURLToPath(line) : line));
  return { code, stdout, loaded: [...new Set(loaded)] };
}

/**
 * What is not allowed among `loaded` (the compiled files, read back into what they hold: cli-build.ts):
 * packages by name, modules of src/ by their path as compiled (cli/main.js).
 */
function outside(loaded: string[]): string[] {
  const found: string[] = [];
  for (const input of builtInputs(loaded)) {
    const name = packageOf(input);
    if (name !== undefined) {
      if (!PACKAGES.includes(name)) found.push(`package ${name}`);
      continue;
    }
    const module = input.replace(/^src\//, '').replace(/\.ts$/, '.js');
    if (!input.startsWith('src/') || (!MODULES.has(module) && !TABLE.test(module)))
      found.push(`module ${module}`);
  }
  return [...new Set(found)].sort();
}

/** Every command and subcommand of the table, as words: ['status'], ['limits', 'set'], ... */
function commandPaths(): string[][] {
  const cli = new Cli({ env: {}, stdout: process.stdout, stderr: process.stderr });
  const program = buildProgram(cli);
  // Its listeners leave process.stdout: the next file of this process must not inherit them.
  cli.dispose();
  const paths: string[][] = [];
  const walk = (command: typeof program, path: string[]) => {
    for (const sub of command.commands) {
      paths.push([...path, sub.name()]);
      walk(sub, [...path, sub.name()]);
    }
  };
  walk(program, []);
  return paths;
}

describe('what --help loads', () => {
  it('the trace sees a library a command loads when it runs', async () => {
    // The check below proves something only if the trace would show a library: `simulate` with a
    // bad flag loads nothing, but `status` without a token reaches its own file, and with it the
    // config (zod).
    const { code, loaded } = await traced(['status']);
    expect(code).not.toBe(0);
    expect(outside(loaded)).toContain('package zod');
  });

  it('learner-transfer --help loads commander and the table, nothing else', async () => {
    const { code, stdout, loaded } = await traced(['--help']);
    expect(code).toBe(0);
    expect(stdout).toContain('Usage: learner-transfer');
    expect(outside(loaded)).toEqual([]);
  });

  it('COMMAND --help loads the same, for every command and subcommand', async () => {
    const paths = commandPaths();
    expect(paths.length).toBeGreaterThan(25);
    const results = [];
    // Four at a time: each is a process of its own.
    for (let i = 0; i < paths.length; i += 4) {
      const batch = paths.slice(i, i + 4);
      results.push(
        ...(await Promise.all(
          batch.map(async (path) => ({ path: path.join(' '), ...(await traced([...path, '--help'])) })),
        )),
      );
    }
    for (const r of results) {
      expect(r.code, r.path).toBe(0);
      expect(r.stdout, r.path).toContain(`Usage: learner-transfer ${r.path}`);
      expect(outside(r.loaded), `${r.path} --help`).toEqual([]);
    }
  });
});
