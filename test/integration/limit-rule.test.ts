// One rule for limits. A limit is N/DURATION with N a whole number from 1 to
// RATE_MAX_COUNT and a window of whole milliseconds from 1 ms to a year. The environment (LIMIT_*),
// the CLI (`limits set`) and the dashboard (POST /api/controls/limits) read it with one parser, refuse
// the same texts with a message naming the field and the value, and store nothing then; the limiter's
// Lua (includes/policy.lua) refuses the same stored values as decodeRate; and a worker that meets a
// malformed stored policy says so in an error line naming the organization and the stored value.
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/core/config.ts';
import { buildDashboard } from '../../src/dashboard/server.ts';
import { parseRate, RATE_MAX_COUNT, RATE_MAX_WINDOW_MS } from '../../src/core/duration.ts';
import { ConfigError } from '../../src/core/errors.ts';
import { decodeRate } from '../../src/limiter/policy.ts';
import { TransferBudget } from '../../src/limiter/transfer-budget.ts';
import { EXIT } from '../../src/cli/shared.ts';
import { runCommand, withoutNoPersistenceWarning } from '../helpers/cli.ts';
import { basic, csrfFromPage, DASHBOARD_TOKEN } from '../helpers/dashboard.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';

let h: Harness;
let app: FastifyInstance;
let csrf: string;

beforeAll(async () => {
  h = await startHarness({
    tag: 'limit-rule',
    sim: { learners: 60 },
    env: { DASHBOARD_TOKEN, LIMIT_PER_TOKEN: '20/2s', LIMIT_PER_ORG: '60/4s', LOG_LEVEL: 'info' },
  });
  app = await buildDashboard(h.ctx, { bullBoard: false });
  csrf = await csrfFromPage(app, '/controls');
});
afterAll(async () => {
  await app?.close();
  await h?.close();
});

/** Everything a refused change could have touched: the policy hash and the change log. */
const snapshot = async () =>
  JSON.stringify([
    await h.ctx.redis.hgetall(h.ctx.keys.policy('acme')),
    await h.ctx.redis.xlen(h.ctx.keys.changes()),
  ]);

/** The texts the issue found accepted, each with what the refusal must say about it. */
const REFUSED: Array<[text: string, why: RegExp]> = [
  ['5/0.4ms', /0\.4ms is not a whole number of milliseconds/],
  ['7/99999999999999d', /longer than 365d/],
  ['5/0s', /shorter than 1ms/],
  ['5/366d', /longer than 365d/],
  [`${RATE_MAX_COUNT + 1}/1s`, new RegExp(`more than ${RATE_MAX_COUNT}`)],
  ['0/1h', /at least 1/],
];

describe('the parser', () => {
  it('accepts whole-millisecond windows from 1 ms to a year and counts from 1 to the cap', () => {
    expect(parseRate('1/1ms')).toEqual({ max: 1, windowMs: 1 });
    expect(parseRate('5/1.5s')).toEqual({ max: 5, windowMs: 1500 });
    expect(parseRate('5/0.001s')).toEqual({ max: 5, windowMs: 1 });
    expect(parseRate('100/h')).toEqual({ max: 100, windowMs: 3_600_000 });
    expect(parseRate(`${RATE_MAX_COUNT}/365d`)).toEqual({
      max: RATE_MAX_COUNT,
      windowMs: RATE_MAX_WINDOW_MS,
    });
    for (const [text] of REFUSED) expect(parseRate(text), text).toBeUndefined();
    for (const text of ['5/0.0005s', '5/1.0005s', '5/8760.0001h', '5/1e3ms', '5/-1s'])
      expect(parseRate(text), text).toBeUndefined();
  });

  it('LIMIT_PER_TOKEN and LIMIT_PER_ORG: refused with the variable, the value and why', () => {
    for (const [text, why] of REFUSED) {
      for (const variable of ['LIMIT_PER_TOKEN', 'LIMIT_PER_ORG']) {
        let problems: readonly string[] = [];
        try {
          loadConfig({ [variable]: text });
        } catch (err) {
          problems = (err as ConfigError).problems;
        }
        expect(problems, `${variable}=${text}`).toHaveLength(1);
        expect(problems[0]).toContain(`${variable}: expected N/DURATION like 100/1h`);
        expect(problems[0]).toContain(`got '${text}'`);
        expect(problems[0]).toMatch(why);
      }
    }
  });
});

describe('POST /api/controls/limits', () => {
  it('refuses 5/0.4ms and 7/99999999999999d with 400 naming the field and the value; nothing stored', async () => {
    const before = await snapshot();
    const cases: Array<[field: 'perToken' | 'perOrg', text: string, why: RegExp]> = [
      ['perToken', '5/0.4ms', /0\.4ms is not a whole number of milliseconds/],
      ['perOrg', '7/99999999999999d', /longer than 365d/],
      ['perToken', `${RATE_MAX_COUNT + 1}/1h`, /more than/],
    ];
    for (const [field, text, why] of cases) {
      const r = await app.inject({
        method: 'POST',
        url: '/api/controls/limits',
        headers: { ...basic(DASHBOARD_TOKEN, 'alice'), 'x-csrf-token': csrf },
        payload: { org: 'acme', [field]: text },
      });
      expect(r.statusCode, r.body).toBe(400);
      const message = r.json().message as string;
      expect(message.startsWith(`${field}: expected N/DURATION`), message).toBe(true);
      expect(message).toContain(`got '${text}'`);
      expect(message).toMatch(why);
    }
    expect(await snapshot()).toBe(before);
  });
});

describe('limits set', () => {
  it('refuses them with exit 2 and a message naming the flag and the value; nothing stored', async () => {
    const before = await snapshot();
    const cases: Array<[flag: string, text: string, why: RegExp]> = [
      ['--per-org', '7/99999999999999d', /longer than 365d/],
      ['--per-token', '5/0.4ms', /0\.4ms is not a whole number of milliseconds/],
    ];
    for (const [flag, text, why] of cases) {
      const r = await runCommand(['limits', 'set', '--org', 'acme', flag, text], h.env);
      const stderr = withoutNoPersistenceWarning(r.stderr);
      expect(r.code, stderr).toBe(EXIT.usage);
      expect(stderr).toContain(`${flag}: expected N/DURATION`);
      expect(stderr).toContain(`got '${text}'`);
      expect(stderr).toMatch(why);
      expect(r.stdout).not.toMatch(/limits unchanged/);
    }
    expect(await snapshot()).toBe(before);
  });
});

describe('the stored policy', () => {
  // Stored form "max/windowMs": accepted by both the Lua (peek, acquire, learn) and decodeRate, or by
  // neither. The bounds are those of the parser.
  const ACCEPTED = ['1/1', '5/1000', '00005/1000', `${RATE_MAX_COUNT}/${RATE_MAX_WINDOW_MS}`];
  const MALFORMED = [
    '5/0',
    '0/1000',
    '7/8.64e+21',
    '7/864000000000000000000',
    `${RATE_MAX_COUNT + 1}/1000`,
    `5/${RATE_MAX_WINDOW_MS + 1}`,
    '5/1000.5',
    ' 5/1000',
    '-1/1000',
    '5/',
    '',
  ];

  it('includes/policy.lua refuses exactly what decodeRate refuses', async () => {
    const prefix = `${h.prefix}-lua`;
    const fallback = { max: 3, windowMs: 7000 };
    const budget = new TransferBudget(h.ctx.redis, {
      prefix,
      limitPerToken: fallback,
      limitPerOrg: { max: 9, windowMs: 9000 },
      inflightTtlMs: 1000,
    });
    const key = budget.keys.policy('lua');
    try {
      for (const stored of [...ACCEPTED, ...MALFORMED]) {
        await h.ctx.redis.hset(key, 'token', stored);
        const view = await budget.peek('lua', ['t1']);
        const lua = { max: view.tokens[0]?.limit, windowMs: view.tokens[0]?.windowMs };
        const ts = decodeRate(stored);
        const expected = ACCEPTED.includes(stored) ? ts : fallback;
        expect(ts === null, `decodeRate('${stored}')`).toBe(!ACCEPTED.includes(stored));
        expect(lua, `peek with token = '${stored}'`).toEqual(expected);
      }
    } finally {
      await h.ctx.redis.del(key);
    }
  });

  it('a worker that meets a malformed stored policy says so in an error line naming the organization and the value', async () => {
    const key = h.ctx.keys.policy('acme');
    const saved = await h.ctx.redis.hgetall(key);
    // As `limits set` stored them before the fix (5/0.4ms and 7/99999999999999d).
    await h.ctx.redis.hset(key, { token: '5/0', org: '7/8.64e+21' });
    try {
      await h.enqueueIds(learnersNotIn('acme', 6));
      const result = await h.workUntilIdle();
      expect(result.reason).toBe('idle');
      const errors = h.logLines
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .filter((l) => l.level === 50 && l.org === 'acme' && typeof l.stored === 'string');
      // Once per interval and field, however many acquires met it.
      expect(errors.map((e) => [e.field, e.stored])).toEqual(
        expect.arrayContaining([
          ['org', '7/8.64e+21'],
          ['token', '5/0'],
        ]),
      );
      expect(errors).toHaveLength(2);
      for (const e of errors) {
        expect(e.msg).toContain(`organization 'acme'`);
        expect(e.msg).toContain(`'${String(e.stored)}'`);
      }
    } finally {
      await h.ctx.redis.del(key);
      if (Object.keys(saved).length > 0) await h.ctx.redis.hset(key, saved);
    }
  });
});

describe('the burst and the run window through the CLI', () => {
  it('sets, shows and resets them; a bad value is refused naming the flag and the piece, with nothing stored', async () => {
    const set = await runCommand(['limits', 'set', '--org', 'acme', '--burst', '12%'], h.env);
    expect(set.code, set.stderr).toBe(0);
    expect(set.stdout).toMatch(/acme: burst \S+ -> 12%/);
    expect(await h.ctx.redis.hget(h.ctx.keys.policy('acme'), 'burst')).toBe('12%');

    const before = await snapshot();
    for (const [args, why] of [
      [
        ['--burst', '0'],
        /--burst: expected a number of permits \(like 10\), a share of the limit \(like 10%\) or off, got '0'/,
      ],
      [['--run-window', 'Mon-Fry 18:00-07:00'], /unknown day 'Fry'/],
      [['--tz', 'Mars/Olympus'], /time zone 'Mars\/Olympus' is unknown \(expected an IANA name/],
      [['--blackout', '2026-02-30'], /there is no date 2026-02-30 in the calendar/],
    ] as const) {
      const r = await runCommand(['limits', 'set', '--org', 'acme', ...args], h.env);
      expect(r.code, r.stderr).toBe(EXIT.usage);
      expect(r.stderr).toMatch(why);
    }
    expect(await snapshot()).toBe(before);

    const window = await runCommand(
      [
        'limits',
        'set',
        '--org',
        'acme',
        '--run-window',
        'mon-fri 18:00-07:00,sat-sun all',
        '--tz',
        'Europe/Berlin',
        '--blackout',
        '2026-12-21..2027-01-06',
      ],
      h.env,
    );
    expect(window.code, window.stderr).toBe(0);
    expect(window.stdout).toMatch(/run window: (open until|opens) .*Europe\/Berlin/);
    const show = await runCommand(['limits', 'show', '--org', 'acme'], h.env);
    expect(show.stdout).toMatch(
      /run window {5}Mon-Fri 18:00-07:00, Sat-Sun all \(Europe\/Berlin\), blackout 2026-12-21\.\.2027-01-06: (open until|opens) /,
    );
    expect(show.stdout).toMatch(/pacing {9}burst 12%/);
    // status says the same, as the README shows it: the pacing line, each bucket, the run window's state.
    const status = await runCommand(['status', '--org', 'acme'], h.env);
    expect(status.stdout).toMatch(
      /\n {2}pacing: the organization 7 at once, then one every 67 ms; tokens 2 at once, then one every 100 ms\n/,
    );
    expect(status.stdout).toMatch(/token \S+: \d+ used, 0 in flight, \d+ of 20 left, bucket 2 of 2\n/);
    expect(status.stdout).toMatch(
      /\n {2}run window: Mon-Fri 18:00-07:00, Sat-Sun all \(Europe\/Berlin\), blackout 2026-12-21\.\.2027-01-06: (open until|waiting for the run window \(opens) /,
    );
    const json = JSON.parse((await runCommand(['limits', 'show', '--org', 'acme', '--json'], h.env)).stdout);
    expect(json.orgs[0].runWindow).toMatchObject({
      windows: 'Mon-Fri 18:00-07:00, Sat-Sun all',
      tz: 'Europe/Berlin',
    });
    expect(json.orgs[0].burst).toEqual({ value: '12%', stored: true });

    // A plain reset keeps the window (and takes LIMIT_BURST); reset --run-window removes it.
    const reset = await runCommand(['limits', 'reset', '--org', 'acme'], h.env);
    expect(reset.code).toBe(0);
    expect(await h.ctx.redis.hget(h.ctx.keys.policy('acme'), 'runWindow')).toBe(
      'Mon-Fri 18:00-07:00, Sat-Sun all',
    );
    expect(await h.ctx.redis.hget(h.ctx.keys.policy('acme'), 'burst')).toBe('100%');
    const off = await runCommand(['limits', 'reset', '--org', 'acme', '--run-window'], h.env);
    expect(off.code).toBe(0);
    expect(off.stdout).toMatch(/runWindow \{.*\} -> -/);
    expect(await h.ctx.redis.hget(h.ctx.keys.policy('acme'), 'open')).toBeNull();
  });

  it('LIMIT_BURST: refused with the variable and the value', () => {
    expect(() => loadConfig({ LIMIT_BURST: '0%' })).toThrow(
      /LIMIT_BURST: expected a number of permits .* got '0%'/,
    );
    expect(loadConfig({ LIMIT_BURST: '25%' }).burst).toEqual({ percent: 25 });
    expect(loadConfig({}).burst).toEqual({ percent: 10 });
  });
});
