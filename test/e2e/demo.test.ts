// The README's first command, as a user runs it: `learner-transfer demo` (what `npm run demo` calls),
// here with --no-dashboard so it exits. It must do the main job and say what happened.
import { existsSync, mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { deleteKeysUnder } from '../../src/redis/client.ts';
import { runCli } from '../helpers/cli.ts';
import { REDIS_URL } from '../helpers/redis.ts';
import { freePort } from '../helpers/redis-server.ts';
import { waitFor } from '../helpers/wait.ts';

describe('demo', () => {
  it('transfers jobs.example.csv on the simulator within the limits and writes the reports', async () => {
    const out = join(mkdtempSync(join(tmpdir(), 'lt-demo-')), 'out');
    const r = await runCli(['demo', '--no-dashboard', '--out', out], { REDIS_URL }, 120_000);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/enqueue {3}run \S+: 52 rows read, 50 enqueued, 2 rejected/);
    expect(r.stdout).toMatch(
      /limits {4}10\/4s per token \(2 tokens\), 16\/4s per organization, paced with a burst of 25%/,
    );
    expect(r.stdout).toMatch(/transferred +44 /);
    expect(r.stdout).toMatch(/already-in-org +3 /);
    expect(r.stdout).toMatch(/not-found +2 /);
    expect(r.stdout).toMatch(/forbidden +1 /);
    expect(r.stdout).toMatch(/service {3}50 requests seen, 0 answered 429, 0 limit violations/);
    expect(r.stdout).toContain("jobs.example.csv:53: learner id 'abc' is not a number");
    const report = readFileSync(join(out, 'report.csv'), 'utf8').trim().split('\n');
    expect(report).toHaveLength(51);
    expect(readFileSync(join(out, 'failures.csv'), 'utf8').trim().split('\n')).toHaveLength(4);
    expect(existsSync(join(out, 'rejects.csv'))).toBe(true);
    expect(r.stdout).not.toContain('sim-acme-1');
    // The demo deletes its own keys at the end, and says so.
    const prefix =
      /state {5}Redis keys under the prefix (ltx-demo-[0-9a-f]+) \(deleted when the demo ends/.exec(
        r.stdout,
      )?.[1];
    expect(prefix).toBeDefined();
    expect(r.stdout).toContain('explore   the state is deleted now: run the demo with --keep');
    const redis = new Redis(REDIS_URL);
    const left = await redis.keys(`${prefix}*`);
    await redis.quit();
    expect(left).toEqual([]);
  });

  it('with --keep, leaves its state and prints the commands that read it, which work as printed', async () => {
    const out = join(mkdtempSync(join(tmpdir(), 'lt-demo-')), 'out');
    const r = await runCli(
      [
        'demo',
        '--no-dashboard',
        '--keep',
        '--out',
        out,
        '--limit-per-token',
        '100/1s',
        '--limit-per-org',
        '200/1s',
      ],
      { REDIS_URL },
      120_000,
    );
    expect(r.code).toBe(0);
    const lines = r.stdout.split('\n');
    const at = lines.findIndex((l) =>
      l.startsWith('explore   now or after the demo (--keep), in another terminal:'),
    );
    expect(at).toBeGreaterThan(0);
    const [exportLine, status, report, audit] = lines.slice(at + 1, at + 5).map((l) => l.trim());
    const env = Object.fromEntries(
      (exportLine ?? '')
        .replace(/^export /, '')
        .split(' ')
        .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
    ) as Record<string, string>;
    expect(Object.keys(env)).toEqual([
      'QUEUE_PREFIX',
      'LEARNER_API_TOKENS_FILE',
      'LIMIT_PER_TOKEN',
      'LIMIT_PER_ORG',
      'LIMIT_BURST',
    ]);
    // The tokens are in a private file, not on the screen.
    expect(r.stdout).not.toContain('sim-acme-1');
    expect(statSync(env.LEARNER_API_TOKENS_FILE!).mode & 0o077).toBe(0);
    const redis = new Redis(REDIS_URL);
    try {
      expect((await redis.keys(`${env.QUEUE_PREFIX}*`)).length).toBeGreaterThan(0);
      const run = (line: string | undefined) => {
        const args = (line ?? '').replace(/^npx learner-transfer /, '').split(' ');
        return runCli(args, { REDIS_URL, LEARNER_API_TOKENS: '', ...env }, 60_000);
      };
      const s = await run(status);
      expect(s.code).toBe(0);
      // Buckets in the order Redis keeps them: each one on its own.
      expect(s.stdout).toMatch(/learners: .*\btransferred 44\b/);
      expect(s.stdout).toMatch(/learners: .*\balready-in-org 3\b/);
      // The same limits as the demo's: no warning that the environment differs from Redis.
      expect(s.stderr).not.toContain('differ from the limits stored');
      const rep = await run(report);
      expect(rep.code).toBe(0);
      expect(rep.stdout.trim().split('\n')).toHaveLength(51);
      const aud = await run(audit);
      expect(aud.code).toBe(0);
      expect(
        aud.stdout
          .trim()
          .split('\n')
          .filter((l) => l.includes('"kind":"transfer"')),
      ).toHaveLength(44); // the 44 transferred: a 400 "already associated" brings no transfer
    } finally {
      await deleteKeysUnder(redis, env.QUEUE_PREFIX!);
      await redis.quit();
    }
  });

  it('starts a throwaway Redis when none answers at REDIS_URL', async () => {
    const port = await freePort();
    const out = join(mkdtempSync(join(tmpdir(), 'lt-demo-')), 'out');
    const r = await runCli(
      ['demo', '--no-dashboard', '--out', out, '--limit-per-token', '100/1s', '--limit-per-org', '200/1s'],
      { REDIS_URL: `redis://127.0.0.1:${port}` },
      120_000,
    );
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(
      /no Redis at redis:\/\/127\.0\.0\.1:\d+: started a throwaway one at redis:\/\/127\.0\.0\.1:\d+/,
    );
    expect(r.stdout).toMatch(/transferred +44 /);
  });
});

describe('demo stopped by a signal mid-run', () => {
  // A throwaway Redis must not outlive the demo: a SIGTERM stops the workers and removes it; a second
  // signal exits at once (no cleanup runs) and the server still goes with the process.
  // Two signals of one kind sent at once may reach the process as one (a pending signal is not queued
  // twice), so the forced exit is asked for with a SIGINT then a SIGTERM: both are delivered.
  it.each([
    ['one SIGTERM: a graceful stop', ['SIGTERM']],
    ['SIGINT then SIGTERM: a forced exit', ['SIGINT', 'SIGTERM']],
  ])('%s leaves no throwaway Redis behind', async (_name, signals) => {
    const { spawnCli, waitExit } = await import('../helpers/cli.ts');
    const { redisAnswers } = await import('../../src/demo/throwaway-redis.ts');
    const port = await freePort();
    const out = join(mkdtempSync(join(tmpdir(), 'lt-demo-')), 'out');
    const child = spawnCli(['demo', '--no-dashboard', '--out', out], {
      REDIS_URL: `redis://127.0.0.1:${port}`,
    });
    await waitFor(
      'the demo to enqueue on its throwaway Redis',
      () => ({ stdout: child.output.stdout, exitCode: child.exitCode }),
      (o) => o.stdout.includes('enqueue ') || o.exitCode !== null,
      { timeoutMs: 60_000, everyMs: 50, show: (o) => `exit ${o.exitCode}, stdout ${o.stdout.slice(-600)}` },
    );
    const url = /started a throwaway one at (redis:\/\/127\.0\.0\.1:\d+)/.exec(child.output.stdout)?.[1];
    expect(url, child.output.stdout).toBeDefined();
    expect(await redisAnswers(url as string)).toBe(true);
    for (const signal of signals) child.kill(signal as NodeJS.Signals);
    const r = await waitExit(child, 30_000);
    expect(r.code).toBe(130);
    if (signals.length === 1) expect(r.stderr).toContain('demo stopped before the end');
    // The two may be handled in either order: the second of them forces the exit.
    else expect(r.stderr).toMatch(/second SIG(TERM|INT), exiting now/);
    // A forced exit runs no cleanup: the demo SIGKILLs the server as it exits, and the server goes when
    // the kernel next runs it, which on a busy machine can be after the demo's exit is seen here. Wait
    // for it to stop answering (it never does if it was left behind).
    await waitFor(
      'the throwaway Redis to stop answering',
      () => redisAnswers(url as string, 300),
      (answers) => !answers,
      { timeoutMs: 10_000, everyMs: 100 },
    );
  });
});

describe('demo with the dashboard', () => {
  it('keeps the dashboard up after the run until SIGINT, then exits cleanly', async () => {
    const { spawnCli, waitExit } = await import('../helpers/cli.ts');
    const port = await freePort();
    const out = join(mkdtempSync(join(tmpdir(), 'lt-demo-')), 'out');
    const child = spawnCli(
      [
        'demo',
        '--out',
        out,
        '--dashboard-port',
        String(port),
        '--limit-per-token',
        '100/1s',
        '--limit-per-org',
        '200/1s',
      ],
      { REDIS_URL },
    );
    // The run first, then the dashboard line; a demo that exits instead fails here, saying so.
    await waitFor(
      'the demo to print its dashboard address',
      () => ({ stdout: child.output.stdout, exitCode: child.exitCode }),
      (o) => o.stdout.includes('dashboard http') || o.exitCode !== null,
      { timeoutMs: 90_000, everyMs: 100, show: (o) => `exit ${o.exitCode}, stdout ${o.stdout.slice(-600)}` },
    );
    expect(child.exitCode, child.output.stderr.slice(-2000)).toBeNull();
    expect(child.output.stdout).toContain(`dashboard http://localhost:${port}/`);
    const page = await fetch(`http://127.0.0.1:${port}/failures`);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('not-found');
    child.kill('SIGINT');
    const r = await waitExit(child, 30_000);
    expect(r.code).toBe(0);
  });
});
