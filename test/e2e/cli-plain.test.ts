// The CLI as a person meets it (issue 34): plain sentences at a terminal and JSON elsewhere, a live
// progress line for `work`, a quiet end on a closed pipe, "did you mean", one usage error for a missing
// --org, the rejected rows of a dry run, and messages that say what to set. The binary runs as a child,
// at a real pseudo-terminal (`script`) where the terminal is the point.
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../src/cli/shared.ts';
import {
  BIN,
  ROOT,
  runCli,
  runCommand,
  runInTerminal,
  spawnCli,
  TEST_DEFAULTS,
  waitExit,
} from '../helpers/cli.ts';
import { startHarness, learnersNotIn, type Harness } from '../helpers/pipeline.ts';
import { startOwnRedis, type OwnRedis } from '../helpers/redis-server.ts';
import { randomPrefix, REDIS_URL } from '../helpers/redis.ts';

const STACK = /\n\s+at .+:\d+:\d+/;

/** Lines of what a terminal showed, each as it reads after its last redraw (`\r` and erase sequences). */
function screenLines(text: string): string[] {
  return text
    .split('\n')
    .map((line) => {
      const parts = line.replace(/\r$/, '').split('\r');
      // eslint-disable-next-line no-control-regex -- the erase-line sequence of a live line
      return (parts[parts.length - 1] ?? '').replace(/\u001b\[2K/g, '');
    })
    .filter((line) => line.length > 0);
}

let h: Harness;
let own: OwnRedis;
beforeAll(async () => {
  h = await startHarness({ tag: 'plain', env: { LOG_LEVEL: 'info' } });
  // A Redis that keeps nothing on disk, whatever the shared one does: its warning is certain.
  own = await startOwnRedis(['--appendonly', 'no']);
});
afterAll(async () => {
  await h?.close();
  await own?.close();
});

describe('at a terminal', () => {
  it('says the persistence warning as one plain sentence; through a pipe it stays a JSON line', async () => {
    const env = {
      REDIS_URL: own.url,
      QUEUE_PREFIX: randomPrefix('plain-tty'),
      LEARNER_API_TOKENS: 'acme:plain-tty-token-1',
    };
    const tty = await runInTerminal(['status'], env);
    expect(tty.code, tty.stdout).toBe(0);
    const lines = screenLines(tty.stdout);
    expect(lines.some((l) => l.startsWith('warning: Redis keeps nothing on disk (appendonly no'))).toBe(true);
    expect(lines.filter((l) => l.startsWith('{'))).toEqual([]);
    expect(tty.stdout).not.toContain('plain-tty-token-1');
    const piped = await runCli(['status'], env);
    const json = piped.stderr.split('\n').find((l) => l.includes('Redis keeps nothing on disk'));
    expect(JSON.parse(json ?? '')).toMatchObject({ level: 40 });
    // Asked for, JSON at a terminal too.
    const asked = await runInTerminal(['status'], { ...env, LOG_FORMAT: 'json' });
    expect(screenLines(asked.stdout).some((l) => l.startsWith('{"level":40'))).toBe(true);
  }, 60_000);

  it('work shows a live progress line, not a JSON line per learner, and ends with its summary', async () => {
    await h.enqueueIds(learnersNotIn('acme', 12));
    // ATTEMPTS set for work alone: the queued jobs carry the harness's 4.
    const r = await runInTerminal(['work', '--until-idle', '--org', 'acme'], { ...h.env, ATTEMPTS: '6' });
    expect(r.code, r.stdout).toBe(0);
    const lines = screenLines(r.stdout);
    expect(lines.filter((l) => l.startsWith('{'))).toEqual([]);
    expect(r.stdout).not.toContain('transfer outcome');
    // Drawn in place: the line is redrawn over itself.
    expect(r.stdout).toMatch(
      // eslint-disable-next-line no-control-regex -- the erase-line sequence is the point
      /\r\u001b\[2Kwork: \d+ done, \d+ failed, \d+ waiting, \d+ in flight \| budget \d+ left/,
    );
    expect(lines).toContain('workers stopped (idle): 12 succeeded, 0 failed');
    expect(
      lines.some((l) => /^work: 12 done, 0 failed, 0 waiting, 0 in flight \| budget \d+ left$/.test(l)),
    ).toBe(true);
    const settings = lines.filter((l) => l.startsWith('warning: ATTEMPTS=6 of this work do not apply'));
    expect(settings).toHaveLength(1);
    expect(settings[0]).toContain('the jobs of acme carry ATTEMPTS 4');
    for (const secret of ['sim-acme-1', 'sim-acme-2']) expect(r.stdout).not.toContain(secret);
  }, 90_000);
});

describe('a closed pipe', () => {
  /** The command with its stdout's reader gone before it writes a byte. */
  async function closedStdout(args: string[]) {
    const child = spawnCli(args, h.env);
    child.stdout?.destroy();
    return waitExit(child, 30_000);
  }

  it('report, audit and status end quietly with 0 when the reader has gone', async () => {
    for (const args of [['report'], ['audit'], ['status']]) {
      const r = await closedStdout(args);
      const where = `${args.join(' ')}: exit ${r.code}\n${r.stderr}`;
      expect(r.code, where).toBe(0);
      expect(r.stderr, where).not.toMatch(STACK);
      expect(r.stderr, where).not.toContain('EPIPE');
      expect(r.stderr, where).not.toContain('unexpected error');
    }
  }, 90_000);

  it('report | head -1 exits 0 with no stack trace', async () => {
    const env = { ...TEST_DEFAULTS, ...h.env, PATH: process.env.PATH ?? '' };
    const child = spawn('bash', ['-o', 'pipefail', '-c', `'${process.execPath}' '${BIN}' report | head -1`], {
      cwd: ROOT,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code, err).toBe(0);
    expect(out.trim().split('\n')).toHaveLength(1);
    expect(out).toMatch(/^org,/);
    expect(err).not.toMatch(STACK);
  }, 30_000);
});

describe('messages that say what to do', () => {
  it('status with no configuration names the variables to set (exit 3)', async () => {
    const r = await runCli(['status'], { REDIS_URL, QUEUE_PREFIX: randomPrefix('plain-none') });
    expect(r.code).toBe(EXIT.config);
    expect(r.stderr).toContain('LEARNER_API_TOKENS');
    expect(r.stderr).toContain('LEARNER_API_TOKENS_FILE');
    expect(r.stderr).toContain('no organization is configured');
    expect(r.stdout).toBe('');
    const help = await runCommand(['status', '--help'], {});
    expect(help.stdout).toMatch(/Exit status 3 \(configuration\) when no organization is configured/);
  });

  it('an unknown flag gets "did you mean", by prefix too', async () => {
    const r = await runCommand(['enqueue', '--csv', 'x.csv', '--organization', 'acme'], h.env);
    expect(r.code).toBe(EXIT.usage);
    expect(r.stderr).toContain("unknown option '--organization'");
    expect(r.stderr).toContain('(Did you mean --org?)');
    const typo = await runCommand(['status', '--jsn'], h.env);
    expect(typo.stderr).toContain('(Did you mean --json?)');
  });

  it('--help marks required flags and lists the variables the command reads', async () => {
    const enqueue = await runCommand(['enqueue', '--help'], {});
    expect(enqueue.stdout).toMatch(/--csv <file>\s+CSV file of learner ids \(required\)/);
    expect(enqueue.stdout).toContain('Environment');
    expect(enqueue.stdout).toMatch(/LEARNER_API_TOKENS\s/);
    expect(enqueue.stdout).toMatch(/ATTEMPTS, BACKOFF\s+read here: fixed on each learner's job when it is/);
    const work = await runCommand(['work', '--help'], {});
    expect(work.stdout).toMatch(/ATTEMPTS, BACKOFF\s+not read for the learners queued/);
    expect(work.stdout).toContain('SPOOL_DIR');
  });

  it('a file without an org column and no --org is one usage error, before anything is written', async () => {
    const file = h.writeFile(
      'no-org.csv',
      `learnerId\n${Array.from({ length: 10 }, (_, i) => i + 500).join('\n')}\n`,
    );
    const h2 = { ...h.env, LEARNER_API_TOKENS: 'acme:sim-acme-1,beta:sim-beta-1' };
    for (const args of [
      ['enqueue', '--csv', file],
      ['enqueue', '--csv', file, '--dry-run'],
      ['plan', '--csv', file],
    ]) {
      const r = await runCommand(args, h2);
      const where = `${args.join(' ')}: exit ${r.code}\n${r.stderr}`;
      expect(r.code, where).toBe(EXIT.usage);
      const said = r.stderr.trim().split('\n');
      expect(said, where).toHaveLength(1);
      expect(said[0], where).toContain('--org is required');
      expect(said[0], where).toContain('one of: acme, beta');
    }
    expect(await h.ctx.store.get('acme', 500)).toBeUndefined();
  });

  it('enqueue --dry-run lists the rows a real run rejects, by line and reason', async () => {
    const file = h.writeFile('dry.csv', 'learnerId\n601\nnope\n602\n601\n-3\n');
    const r = await runCommand(['enqueue', '--csv', file, '--org', 'acme', '--dry-run'], h.env);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain(`${file}:3: learner id 'nope' is not a number`);
    expect(r.stderr).toContain(`${file}:5: duplicate of line 2 (learner 601 in acme)`);
    expect(r.stderr).toMatch(new RegExp(`${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:6: `));
    expect(r.stdout).toContain('2 learners (3 rows rejected or repeated)');
    expect(await h.ctx.store.get('acme', 601)).toBeUndefined();
  });

  it('a malformed REDIS_URL shows the right form; a bad LOG_FORMAT names the field (exit 3)', async () => {
    const url = await runCommand(['status'], { ...h.env, REDIS_URL: 'localhost:6379' });
    expect(url.code).toBe(EXIT.config);
    expect(url.stderr).toContain('REDIS_URL: expected a redis or rediss URL, got');
    expect(url.stderr).toContain('redis://[user:password@]host:6379[/db]');
    expect(url.stderr).toContain('rediss://');
    const format = await runCommand(['status'], { ...h.env, LOG_FORMAT: 'pretty' });
    expect(format.code).toBe(EXIT.config);
    expect(format.stderr).toContain(
      "LOG_FORMAT: expected auto (text at a terminal, JSON otherwise), json or text, got 'pretty'",
    );
  });
});
