// Files people typed, and settings and flags people mistyped: the real CLI, as a child, on each. A clear
// message naming the file and line (or the variable or flag) and the problem; valid rows go through;
// never a crash, never a stack trace; exit 0 when something valid was read, 5 for input, 3 for
// configuration, 2 for usage.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../src/cli/shared.ts';
import { createKeys } from '../../src/core/keys.ts';
import { type CliResult, runCommand, withoutNoPersistenceWarning } from '../helpers/cli.ts';
import { deletePrefix, newRedis, randomPrefix, REDIS_URL } from '../helpers/redis.ts';

const prefix = randomPrefix('chaos-input');
const dir = mkdtempSync(join(tmpdir(), 'lt-bad-input-'));
const redis = newRedis();
const env = {
  REDIS_URL,
  QUEUE_PREFIX: prefix,
  LEARNER_API_TOKENS: 'acme:bad-input-token-1,beta:bad-input-token-2',
};
const STACK = /\n\s+at .+:\d+:\d+/;

afterAll(async () => {
  await deletePrefix(redis, prefix);
  await redis.quit();
});

function utf16(text: string, endian: 'le' | 'be'): Buffer {
  const le = Buffer.from(text, 'utf16le');
  if (endian === 'be')
    for (let i = 0; i + 1 < le.length; i += 2) [le[i], le[i + 1]] = [le[i + 1] ?? 0, le[i] ?? 0];
  return Buffer.concat([Buffer.from(endian === 'le' ? [0xff, 0xfe] : [0xfe, 0xff]), le]);
}

interface Case {
  name: string;
  body: string | Buffer;
  exit: number;
  /** Messages that must be on stderr (file:line: problem). */
  says: (string | RegExp)[];
  /** Learner ids that must end up queued for acme. */
  queued?: number[];
  /** Jobs enqueued in all (default: the length of `queued`). */
  enqueued?: number;
}

const garbage = Buffer.alloc(8192);
for (let i = 0; i < garbage.length; i++) garbage[i] = (i * 7919 + 13) % 256;

const CASES: Case[] = [
  { name: 'empty.csv', body: '', exit: EXIT.input, says: ['empty.csv: the file is empty'] },
  {
    name: 'header-only.csv',
    body: 'learnerId\n',
    exit: EXIT.input,
    says: ['header-only.csv: no valid learner id was read (the file has no data rows)'],
  },
  {
    name: 'wrong-columns.csv',
    body: 'user,organisation\n5,acme\n',
    exit: EXIT.input,
    says: [
      "wrong-columns.csv:1: no learner id column: the header must name one of learnerId, learner_id or id (any case); found 'user', 'organisation'",
    ],
  },
  {
    name: 'numbers.csv',
    body: 'learnerId\n-5\n0\n2.5\n1e3\n9007199254740993\n123456789012345678901234567890\nabc\n12x\n101\n',
    exit: EXIT.ok,
    says: [
      "numbers.csv:2: learner id '-5' is negative",
      "numbers.csv:3: learner id '0' is zero",
      "numbers.csv:4: learner id '2.5' is not a whole number",
      "numbers.csv:5: learner id '1e3' is not a whole number",
      "numbers.csv:6: learner id '9007199254740993' is past 2^53-1",
      'numbers.csv:7: learner id',
      "numbers.csv:8: learner id 'abc' is not a number",
      "numbers.csv:9: learner id '12x' is not a number",
    ],
    queued: [101],
  },
  {
    name: 'long-line.csv',
    body: `learnerId\n102\n${'7'.repeat(10 * 1024 * 1024)}\n103\n`,
    exit: EXIT.ok,
    says: ['long-line.csv:3: line is 10485760 bytes long, more than the 65536 bytes a row may have'],
    queued: [102, 103],
  },
  {
    name: 'binary.csv',
    body: garbage,
    exit: EXIT.input,
    says: [/binary\.csv:\d+: (line holds NUL bytes|no learner id column)/],
  },
  {
    name: 'mixed.csv',
    body: 'learner_id,org,note\n104,acme,ok\n"105,acme,stray quote\n106,acme,after the quote\n107,nowhere,unknown org\n108,,no org\n\u0000\u0001,acme\n109,beta,ok\n',
    exit: EXIT.ok,
    says: [
      'mixed.csv:3: a quote opens a cell and does not close on this line',
      "mixed.csv:5: organization 'nowhere' has no token in LEARNER_API_TOKENS",
      'mixed.csv:7: line holds NUL bytes',
    ],
    // 108's empty org cell takes --org; 109 goes to beta.
    queued: [104, 106, 108],
    enqueued: 4,
  },
  {
    name: 'duplicates.csv',
    body: 'id\n110\n111\n110\n110\n',
    exit: EXIT.ok,
    says: [
      'duplicates.csv:4: duplicate of line 2 (learner 110 in acme)',
      'duplicates.csv:5: duplicate of line 2',
    ],
    queued: [110, 111],
  },
  {
    name: 'utf16le.csv',
    body: utf16('learnerId\r\n112\r\nnope\r\n113\r\n', 'le'),
    exit: EXIT.ok,
    says: ["utf16le.csv:3: learner id 'nope' is not a number"],
    queued: [112, 113],
  },
  {
    name: 'utf16be.csv',
    body: utf16('learnerId\n114\n-1\n115\n', 'be'),
    exit: EXIT.ok,
    says: ["utf16be.csv:3: learner id '-1' is negative"],
    queued: [114, 115],
  },
  {
    // The marker that replaced a refused line ended in \n and merged with the next CRLF line.
    name: 'crlf-refused.csv',
    body: 'learnerId\r\n117\r\n118\u0000\r\n119\r\n120\r\n',
    exit: EXIT.ok,
    says: ['crlf-refused.csv:3: line holds NUL bytes'],
    queued: [117, 119, 120],
  },
  {
    name: 'escape.csv',
    body: 'learnerId\n\u001b[31mred\u001b[0m\n116\n',
    exit: EXIT.ok,
    says: ["escape.csv:2: learner id '\\x1b[31mred\\x1b[0m' is not a number"],
    queued: [116],
  },
];

async function inBatches<T, R>(items: readonly T[], size: number, run: (t: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (let i = 0; i < items.length; i += size)
    out.push(...(await Promise.all(items.slice(i, i + size).map(run))));
  return out;
}

describe('a corpus of bad CSV files through `enqueue`', () => {
  const results = new Map<string, CliResult>();
  beforeAll(async () => {
    for (const c of CASES) writeFileSync(join(dir, c.name), c.body);
    const runs = await inBatches(CASES, 3, (c) =>
      runCommand(
        [
          'enqueue',
          '--csv',
          join(dir, c.name),
          '--org',
          'acme',
          '--quiet',
          '--rejects',
          join(dir, `${c.name}.rejects`),
        ],
        env,
      ),
    );
    CASES.forEach((c, i) => results.set(c.name, runs[i] as CliResult));
  }, 120_000);

  it.each(CASES.map((c) => [c.name, c] as const))('%s', async (_name, c) => {
    const r = results.get(c.name) as CliResult;
    const where = `${c.name}: exit ${r.code}\n${r.stderr.slice(0, 3000)}`;
    expect(r.signal, where).toBeNull();
    expect(r.code, where).toBe(c.exit);
    expect(r.stderr, where).not.toMatch(STACK);
    expect(r.stderr, where).not.toContain('unexpected error');
    for (const s of c.says) {
      if (typeof s === 'string') expect(r.stderr, where).toContain(s);
      else expect(r.stderr, where).toMatch(s);
    }
    // Every message names the file.
    const own = withoutNoPersistenceWarning(r.stderr);
    for (const line of own.split('\n').filter((l) => l.trim() && !l.startsWith('(more'))) {
      expect(line, where).toContain(c.name);
    }
    if (c.queued) {
      const keys = createKeys(prefix);
      for (const id of c.queued) {
        const rec = await redis.hget(keys.outcomes('acme'), String(id));
        expect(rec, `${c.name}: learner ${id} queued`).toContain('"b":"queued"');
      }
      expect(r.stdout).toContain(`enqueued   ${c.enqueued ?? c.queued.length}\n`);
    }
  });

  it('writes each reject, with its line, to the rejects file', () => {
    const rejects = readFileSync(join(dir, 'mixed.csv.rejects'), 'utf8');
    expect(rejects.split('\n')[0]).toBe('line,reason,raw');
    expect(rejects).toContain(
      '3,a quote opens a cell and does not close on this line,"""105,acme,stray quote"',
    );
    expect(rejects).toContain(
      '5,organization \'nowhere\' has no token in LEARNER_API_TOKENS,"107,nowhere,unknown org"',
    );
  });

  it('a file that is not there, or a directory, is named with the problem (exit 5)', async () => {
    const [missing, folder] = await Promise.all([
      runCommand(['enqueue', '--csv', join(dir, 'nope.csv'), '--org', 'acme'], env),
      runCommand(['enqueue', '--csv', dir, '--org', 'acme'], env),
    ]);
    expect(missing.code).toBe(EXIT.input);
    expect(missing.stderr).toContain(`${join(dir, 'nope.csv')}: cannot be read (ENOENT`);
    expect(folder.code).toBe(EXIT.input);
    expect(folder.stderr).toContain(`${dir}: cannot be read (not a regular file)`);
    for (const r of [missing, folder]) expect(r.stderr).not.toMatch(STACK);
  });
});

describe('bad configuration and bad flags', () => {
  const good = join(dir, 'good.csv');
  const CONFIG: [string, Record<string, string>, string[], string][] = [
    [
      'LIMIT_PER_TOKEN',
      { LIMIT_PER_TOKEN: '100 per hour' },
      ['work'],
      "LIMIT_PER_TOKEN: expected N/DURATION like 100/1h (units ms, s, m, h, d), got '100 per hour'",
    ],
    ['LIMIT_PER_ORG', { LIMIT_PER_ORG: '0/1d' }, ['status'], 'LIMIT_PER_ORG'],
    [
      'CONCURRENCY',
      { CONCURRENCY: '0' },
      ['status'],
      "CONCURRENCY: expected a whole number from 1 to 1000, got '0'",
    ],
    [
      'ATTEMPTS',
      { ATTEMPTS: '2.5' },
      ['status'],
      "ATTEMPTS: expected a whole number from 1 to 100, got '2.5'",
    ],
    [
      'REQUEST_TIMEOUT',
      { REQUEST_TIMEOUT: 'soon' },
      ['status'],
      "REQUEST_TIMEOUT: expected a duration like 30s or 1500ms (units ms, s, m, h, d), got 'soon'",
    ],
    [
      'REDIS_URL',
      { REDIS_URL: 'http://127.0.0.1:6379' },
      ['status'],
      "REDIS_URL: expected a redis or rediss URL, got 'http://127.0.0.1:6379'",
    ],
    [
      'REDIS_CONNECT_TIMEOUT',
      { REDIS_CONNECT_TIMEOUT: 'forever' },
      ['status'],
      'REDIS_CONNECT_TIMEOUT: expected a duration like 60s or 2m',
    ],
    [
      'LEARNER_API_TOKENS',
      { LEARNER_API_TOKENS: 'acme:ok-token-1,no-colon-secret-xyz' },
      ['status'],
      'LEARNER_API_TOKENS: entry 2 is not ORG:TOKEN',
    ],
    [
      'LEARNER_API_BASE_URL',
      { LEARNER_API_BASE_URL: 'ftp://x' },
      ['work'],
      "LEARNER_API_BASE_URL: expected a http or https URL, got 'ftp://x'",
    ],
    ['LOG_LEVEL', { LOG_LEVEL: 'loud' }, ['status'], 'LOG_LEVEL'],
    [
      'LOG_FORMAT',
      { LOG_FORMAT: 'pretty' },
      ['status'],
      "LOG_FORMAT: expected auto (text at a terminal, JSON otherwise), json or text, got 'pretty'",
    ],
    [
      'REDIS_URL without a scheme',
      { REDIS_URL: '127.0.0.1:6379' },
      ['status'],
      'the form: redis://[user:password@]host:6379[/db], or rediss://... for TLS',
    ],
  ];
  const FLAGS: [string, string[], string][] = [
    [
      '--concurrency 0',
      ['work', '--concurrency', '0'],
      "--concurrency expects a whole number from 1 to 1000, got '0'",
    ],
    [
      '--batch x',
      ['enqueue', '--csv', 'x.csv', '--batch', 'x'],
      "--batch expects a whole number from 1 to 10000, got 'x'",
    ],
    ['--status nope', ['report', '--status', 'nope'], "option '--status <code>' argument 'nope' is invalid"],
    ['--format xml', ['report', '--format', 'xml'], "option '--format <format>' argument 'xml' is invalid"],
    ['missing --csv', ['enqueue'], "required option '--csv <file>' not specified"],
    ['unknown flag', ['work', '--bogus'], "unknown option '--bogus'"],
    ['unknown command', ['transfer-everything'], "unknown command 'transfer-everything'"],
    [
      '--org unknown',
      ['enqueue', '--csv', 'PLACEHOLDER', '--org', 'nowhere'],
      "--org 'nowhere' has no token in LEARNER_API_TOKENS (organizations with tokens: acme, beta)",
    ],
  ];

  it('names the variable, what was expected and what was given; exit 3, no stack, no secret', async () => {
    const results = await inBatches(CONFIG, 3, ([, extra, args]) =>
      runCommand(args, { ...env, LEARNER_API_BASE_URL: 'http://127.0.0.1:9', ...extra }),
    );
    CONFIG.forEach(([name, , , says], i) => {
      const r = results[i] as CliResult;
      const where = `${name}: exit ${r.code}\n${r.stderr}`;
      expect(r.code, where).toBe(EXIT.config);
      expect(r.stderr, where).toContain('invalid configuration');
      expect(r.stderr, where).toContain(says);
      expect(r.stderr, where).not.toMatch(STACK);
      expect(r.stderr, where).not.toContain('no-colon-secret-xyz');
      expect(r.stderr, where).not.toContain('bad-input-token');
    });
  }, 120_000);

  it('names the flag and the problem; exit 2, no stack', async () => {
    writeFileSync(good, 'id\n1\n');
    const results = await inBatches(FLAGS, 3, ([, args]) =>
      runCommand(
        args.map((a) => (a === 'PLACEHOLDER' ? good : a)),
        { ...env, LEARNER_API_BASE_URL: 'http://127.0.0.1:9' },
      ),
    );
    FLAGS.forEach(([name, , says], i) => {
      const r = results[i] as CliResult;
      const where = `${name}: exit ${r.code}\n${r.stderr}`;
      expect(r.code, where).toBe(EXIT.usage);
      expect(r.stderr, where).toContain(says);
      expect(r.stderr, where).not.toMatch(STACK);
    });
  }, 120_000);
});
