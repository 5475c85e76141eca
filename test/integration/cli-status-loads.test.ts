// `status`, `limits show` and `changes` read Redis and nothing else: they open the light context
// (src/app/read-context.ts), and BullMQ, undici, fastify, prom-client and OpenTelemetry stay unloaded,
// on an empty prefix and on one with learners queued (the job counts are read from BullMQ's keys
// directly, ops/views/status.ts). The compiled CLI runs each under a trace of the modules it loads
// (test/helpers/load-trace.mjs, as test/unit/cli-help-loads.test.ts does for --help): a command
// file that imports one of them again, even through another module, fails here.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { builtInputs, packageOf } from '../helpers/cli-build.ts';
import { ROOT, runCommand, TEST_DEFAULTS } from '../helpers/cli.ts';
import { deletePrefix, newRedis, randomPrefix, REDIS_URL } from '../helpers/redis.ts';

/** What none of these commands may load. */
const HEAVY = [
  'bullmq',
  'undici',
  'fastify',
  'prom-client',
  '@bull-board/api',
  '@opentelemetry/api',
  '@opentelemetry/sdk-trace-node',
];

const MAIN = process.env.LT_TEST_CLI ?? '';
const TRACER = join(ROOT, 'test', 'helpers', 'load-trace.mjs');
const prefix = randomPrefix('status-loads');
const env = {
  ...TEST_DEFAULTS,
  REDIS_URL,
  QUEUE_PREFIX: prefix,
  LEARNER_API_TOKENS: 'acme:status-loads-token-1',
  LEARNER_API_BASE_URL: 'http://127.0.0.1:9',
};

/** Runs the compiled CLI with `args` under the trace; its exit code, stdout and the packages it loaded. */
async function traced(args: string[]): Promise<{ code: number | null; stdout: string; packages: string[] }> {
  const trace = join(mkdtempSync(join(tmpdir(), 'lt-status-loads-')), 'trace');
  const child = spawn(process.execPath, ['--import', TRACER, MAIN, ...args], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env, LT_LOAD_TRACE: trace },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  const loaded = readFileSync(trace, 'utf8')
    .split('\n')
    .filter((line) => line && !line.startsWith('node:'))
    .map((line) => (line.startsWith('file:') ? fileURLToPath(line) : line));
  // The compiled files, read back into the sources and packages they hold (cli-build.ts).
  const packages = builtInputs(loaded).flatMap((input) => packageOf(input) ?? []);
  return { code, stdout, packages: [...new Set(packages)].sort() };
}

afterAll(async () => {
  const redis = newRedis();
  await deletePrefix(redis, prefix);
  await redis.quit();
});

describe('what the commands that need Redis alone load', () => {
  it('status, limits show and changes on an empty prefix: Redis, no BullMQ, undici or OpenTelemetry', async () => {
    for (const args of [['status'], ['limits', 'show'], ['changes']]) {
      const r = await traced(args);
      expect(r.code, args.join(' ')).toBe(0);
      // The trace sees packages: the Redis client is among them.
      expect(r.packages, args.join(' ')).toContain('ioredis');
      expect(
        r.packages.filter((p) => HEAVY.includes(p)),
        args.join(' '),
      ).toEqual([]);
    }
  });

  it('status with learners queued counts their jobs, still without BullMQ', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'lt-status-loads-csv-')), 'ids.csv');
    writeFileSync(file, 'learnerId\n1\n2\n3\n');
    const enqueued = await runCommand(['enqueue', '--csv', file, '--org', 'acme', '--quiet'], env);
    expect(enqueued.code, enqueued.stderr).toBe(0);
    const r = await traced(['status']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('learners: queued 3');
    expect(r.stdout).toContain('jobs: 3 waiting');
    expect(r.packages.filter((p) => HEAVY.includes(p))).toEqual([]);
  });
});
