// The overview and `status` of a fleet of 1,000 organizations (one token each, as a reseller runs its
// schools): 940 idle and done, 40 working, 10 with failures, 5 paused, 5 whose token was refused (401).
// On a Redis of the test's own (so INFO commandstats counts this file's commands only), behind a TCP
// proxy that counts round trips: the reads are batched, so 1,000 organizations cost the round trips of
// 10. The page stays small (under 300 KB) and readable: the organizations needing a person or working
// first, the idle ones in one line, paging and a filter kept in the URL. The live feed re-reads only the
// organizations on the page between reads of the whole fleet, and sends only what changed.
import { sseFrames } from '../helpers/sse.ts';
import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type AppContext } from '../../src/app/context.ts';
import { loadConfig } from '../../src/core/config.ts';
import { buildDashboard } from '../../src/dashboard/server.ts';
import { collectStatus } from '../../src/ops/views/status.ts';
import { runCommand } from '../helpers/cli.ts';
import { bearer, DASHBOARD_TOKEN } from '../helpers/dashboard.ts';
import { manyOrgTokens, orgName, seedFleet, type SeededFleet } from '../helpers/many-orgs.ts';
import { countCommands, randomPrefix } from '../helpers/redis.ts';
import { startOwnRedis, type OwnRedis } from '../helpers/redis-server.ts';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts';
import { waitFor } from '../helpers/wait.ts';

interface Fleet {
  ctx: AppContext;
  app: FastifyInstance;
  fleet: SeededFleet;
  /** The CLI's environment, through the proxy. */
  env: Record<string, string>;
}

let own: OwnRedis;
let proxy: TcpProxy;
let counter: Redis;
let big: Fleet;
let small: Fleet;

async function openFleet(orgs: number, shape: Parameters<typeof seedFleet>[1]): Promise<Fleet> {
  const env = {
    REDIS_URL: `redis://127.0.0.1:${proxy.port}`,
    QUEUE_PREFIX: randomPrefix('fleet'),
    LEARNER_API_TOKENS: manyOrgTokens(orgs),
    DASHBOARD_TOKEN,
    LOG_LEVEL: 'silent',
  };
  const ctx = await createContext(loadConfig(env));
  const fleet = await seedFleet(ctx, shape);
  const app = await buildDashboard(ctx, { bullBoard: false });
  return { ctx, app, fleet, env };
}

beforeAll(async () => {
  own = await startOwnRedis();
  proxy = await startTcpProxy(own.port);
  counter = new Redis(own.url);
  big = await openFleet(1000, { working: 40, failing: 10, paused: 5, refused: 5 });
  small = await openFleet(10, { working: 2, failing: 1, paused: 1, refused: 1 });
}, 120_000);
afterAll(async () => {
  for (const f of [big, small]) {
    await f?.app.close();
    await f?.ctx.close();
  }
  counter?.disconnect();
  await proxy?.close();
  await own?.close();
});

const get = async (f: Fleet, url: string) => {
  const r = await f.app.inject({ url, headers: bearer });
  expect(r.statusCode, `${url}: ${r.body.slice(0, 300)}`).toBe(200);
  return r;
};

/** The organizations of a page's cards, in order. */
const cards = (body: string) =>
  [...body.matchAll(/<section class="card" data-org="([^"]+)"/g)].map((m) => m[1]);

/** Round trips and Redis commands of `fn` (the proxy counts the first, the own Redis the second). */
async function cost(fn: () => Promise<unknown>): Promise<{ turns: number; commands: number }> {
  let turns = 0;
  const { commands } = await countCommands(counter, async () => {
    proxy.resetCounts();
    await fn();
    turns = proxy.counts().turns;
  });
  return { turns, commands };
}

describe('the overview of 1,000 organizations', () => {
  it('is a page under 300 KB: alerts, then work, then failures; the 940 idle ones in one line', async () => {
    const r = await get(big, '/');
    const bytes = Buffer.byteLength(r.body);
    console.log(`fleet: overview page of 1,000 organizations = ${bytes} bytes`);
    expect(bytes).toBeLessThan(300_000);
    const { refused, paused, working, idle } = big.fleet;
    expect(idle).toHaveLength(940);
    // A refused token is an error, a pause a warning: errors first; each group in LEARNER_API_TOKENS order.
    expect(cards(r.body)).toEqual([...refused, ...paused, ...working]);
    expect(r.body).toContain(
      '1000 organizations: 10 with alerts, 40 working, 10 with failures, 940 idle, all done',
    );
    expect(r.body).toMatch(/940 organizations idle, all done \(<a href="\/\?state=idle">list them<\/a>\)/);
    expect(r.body).toContain('href="/?page=2" rel="next"');
    expect(r.body).not.toContain(`data-org="${idle[0]}"`);
  });

  it('pages and filters by key and state, the filter kept in the URL', async () => {
    const two = (await get(big, '/api/overview?page=2')).json();
    expect(two.view).toMatchObject({ page: 2, pages: 2, matched: 60, state: 'attention' });
    expect(two.orgs.map((o: { org: string }) => o.org)).toEqual(big.fleet.failing);
    expect(two.orgs.every((o: { state: string }) => o.state === 'failures')).toBe(true);

    const byKey = (await get(big, '/api/overview?q=school-09&state=all&limit=200')).json();
    expect(byKey.view.matched).toBe(100); // school-0900 ... school-0999
    const keys: string[] = byKey.orgs.map((o: { org: string }) => o.org);
    expect(keys.every((k) => k.includes('school-09'))).toBe(true);
    // The ones of the key's range that need a person come first (ranked), then the idle ones.
    const { refused, paused, working, failing } = big.fleet;
    const first = [...refused, ...paused, ...working, ...failing].filter((k) => k.includes('school-09'));
    expect(first.length).toBeGreaterThan(50);
    expect(keys.slice(0, first.length)).toEqual(first);

    const idle = (await get(big, '/api/overview?state=idle&q=school-00')).json();
    expect(idle.view.matched).toBe(99); // school-0001 ... school-0099, all idle
    expect(idle.orgs).toHaveLength(50);
    expect(idle.orgs[0].org).toBe(orgName(0));

    const onlyWorking = (await get(big, '/api/overview?state=working')).json();
    expect(onlyWorking.orgs.map((o: { org: string }) => o.org)).toEqual(working);

    // The page keeps the filter in its form and its links.
    const page = await get(big, '/?q=school-0&state=idle&page=3');
    expect(page.body).toContain('value="school-0"');
    expect(page.body).toMatch(/<option value="idle"\s+selected/);
    expect(page.body).toContain('href="/?q=school-0&amp;state=idle&amp;page=2" rel="prev"');
    expect(cards(page.body)[0]).toBe(orgName(100));

    const bad = await big.app.inject({ url: '/api/overview?state=busy', headers: bearer });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().message).toMatch(/^state: expected one of attention, all, alert/);
    expect((await big.app.inject({ url: '/?q=%3Cb%3E', headers: bearer })).statusCode).toBe(400);
  });

  it('sends only the hours that recorded something, and a small JSON', async () => {
    const r = await get(big, '/api/overview?state=all&limit=200');
    const o = r.json();
    expect(o.orgs).toHaveLength(200);
    for (const org of o.orgs) expect(org.hourly).toHaveLength(1);
    expect(o.orgs[0].hourly[0].counts.transferred).toBeGreaterThan(0);
    const bytes = Buffer.byteLength((await get(big, '/api/overview')).body);
    console.log(`fleet: /api/overview of 1,000 organizations = ${bytes} bytes`);
    expect(bytes).toBeLessThan(150_000);
    expect(o.summary).toMatchObject({
      total: 1000,
      byState: { alert: 10, working: 40, failures: 10, idle: 940 },
    });
  });

  it('reads Redis in as many round trips for 1,000 organizations as for 10', async () => {
    const figures: Record<string, { small: number; big: number; commands: number }> = {};
    for (const [name, run] of [
      ['status read', (f: Fleet) => collectStatus(f.ctx)],
      ['/api/overview', (f: Fleet) => get(f, '/api/overview')],
      ['overview page', (f: Fleet) => get(f, '/')],
    ] as const) {
      await run(big); // scripts loaded, connections up
      await run(small);
      const b = await cost(() => run(big));
      const s = await cost(() => run(small));
      figures[name] = { small: s.turns, big: b.turns, commands: b.commands };
      expect(b.turns, `${name}: round trips, 1,000 vs 10 organizations`).toBeLessThanOrEqual(s.turns + 2);
    }
    // (The commands, those the scripts run included, are printed: they grow with the organizations.)
    console.log(`fleet: round trips (10 orgs / 1,000 orgs, commands at 1,000): ${JSON.stringify(figures)}`);
  });
});

/** A /api/live stream's frames, as they arrive. */
async function liveStream(base: string, query = '') {
  const ac = new AbortController();
  const res = await request(`${base}/api/live${query}`, { headers: bearer, signal: ac.signal });
  expect(res.statusCode).toBe(200);
  const frames: { bytes: number; data: Record<string, unknown> }[] = [];
  const reading = (async () => {
    for await (const frame of sseFrames(res.body)) {
      if (frame.event === 'overview' && frame.data)
        frames.push({
          bytes: Buffer.byteLength(frame.raw),
          data: JSON.parse(frame.data) as Record<string, unknown>,
        });
    }
  })().catch(() => undefined);
  return {
    frames,
    next: (n: number) =>
      waitFor(
        `${n} live frames`,
        () => frames.length,
        (len) => len >= n,
      ),
    async close() {
      ac.abort();
      await reading;
    },
  };
}

describe('the live feed of 1,000 organizations', () => {
  it('re-reads only the page between fleet reads, and sends only what changed', async () => {
    const app = await buildDashboard(big.ctx, {
      bullBoard: false,
      liveIntervalMs: 200,
      liveFleetEveryMs: 600_000,
    });
    const base = (await app.listen({ port: 0, host: '127.0.0.1' })).replace(/\/$/, '');
    const full = await cost(() => get(big, '/api/overview'));
    const live = await liveStream(base);
    try {
      await live.next(2);
      const first = live.frames[0];
      expect(first?.data).toMatchObject({ full: true });
      expect((first?.data.orgs as unknown[]).length).toBe(50);
      expect(first?.bytes).toBeLessThan(150_000);
      // Ticks between fleet reads: the 50 organizations of the page, not the 1,000.
      const seen = live.frames.length;
      const ticks = await cost(() => live.next(seen + 3));
      const perTick = ticks.commands / 3;
      console.log(
        `fleet: live tick = ${Math.round(perTick)} Redis commands, a whole read = ${full.commands}; ` +
          `frames ${live.frames.map((f) => f.bytes).join(' / ')} bytes`,
      );
      expect(perTick).toBeLessThan(full.commands / 5);
      const quiet = live.frames.slice(1);
      for (const f of quiet) {
        expect(f.data).toMatchObject({ full: false, orgs: [] });
        expect(f.bytes).toBeLessThan(10_000);
      }
      // One organization of the page moves a learner: the next frame has it, and only it.
      const org = big.fleet.working[0] as string;
      // seedFleet queued learners 100 * index + 4 and + 5 for each working organization.
      const learnerId = big.fleet.orgs.indexOf(org) * 100 + 4;
      const before = live.frames.length;
      await big.ctx.store.recordAttempt(org, learnerId, big.fleet.runId, {
        bucket: 'transferred',
        code: 'transferred',
        status: 200,
        durationMs: 40,
        countsAsAttempt: true,
      });
      const changed = await waitFor(
        `a live frame with ${org}`,
        () => live.frames.slice(before).find((f) => (f.data.orgs as unknown[]).length > 0),
        (f) => f !== undefined,
      );
      expect(
        (changed?.data.orgs as { org: string; remaining: number }[]).map((o) => [o.org, o.remaining]),
      ).toEqual([[org, 1]]);
    } finally {
      await live.close();
      await app.close();
    }
  });
});

describe('status of 1,000 organizations', () => {
  /** The organizations `status` prints in full, in order (a line with the key alone). */
  const blocks = (out: string) => [...out.matchAll(/^(school-\d{4})$/gm)].map((m) => m[1]);

  it('lists the organizations needing a person or working first, and sums up the idle ones', async () => {
    const r = await runCommand(['status'], big.env);
    expect(r.code, r.stderr).toBe(0);
    const { refused, paused, working, failing } = big.fleet;
    expect(blocks(r.stdout)).toEqual([...refused, ...paused, ...working, ...failing]);
    expect(r.stdout).toContain(
      '1000 organizations: 10 with alerts, 40 working, 10 with failures, 940 idle, all done',
    );
    expect(r.stdout).toContain(
      '940 organizations idle, all done: school-0001, school-0002, school-0003, school-0004, school-0005, and 935 more (--all shows them',
    );
    expect(r.stdout).toMatch(/token [0-9a-f]+: .*\[PAUSED: refused with 401\]/);
  });

  it('--all shows every organization, --org the ones named, --json all of them with their state', async () => {
    const all = await runCommand(['status', '--all'], big.env);
    expect(all.code, all.stderr).toBe(0);
    expect(blocks(all.stdout)).toHaveLength(1000);
    expect(blocks(all.stdout).slice(0, 10)).toEqual([...big.fleet.refused, ...big.fleet.paused]);

    const named = await runCommand(['status', '--org', 'school-0001', 'school-0999'], big.env);
    expect(named.code, named.stderr).toBe(0);
    expect(blocks(named.stdout).sort()).toEqual(['school-0001', 'school-0999']);

    const json = await runCommand(['status', '--json'], big.env);
    expect(json.code, json.stderr).toBe(0);
    const parsed = JSON.parse(json.stdout) as {
      orgs: { org: string; state: string; budget: { tokens: unknown[] } }[];
      summary: { byState: Record<string, number> };
    };
    expect(parsed.orgs.map((o) => o.org)).toEqual(big.fleet.orgs);
    expect(parsed.orgs.every((o) => o.budget.tokens.length === 1)).toBe(true);
    expect(parsed.summary.byState).toEqual({ alert: 10, working: 40, failures: 10, idle: 940 });
    expect(parsed.orgs.find((o) => o.org === big.fleet.failing[0])?.state).toBe('failures');
  });

  it('costs the round trips of 10 organizations', async () => {
    await runCommand(['status'], small.env);
    const s = await cost(() => runCommand(['status'], small.env));
    const b = await cost(() => runCommand(['status'], big.env));
    console.log(
      `fleet: status round trips, 10 orgs ${s.turns}, 1,000 orgs ${b.turns} (${b.commands} commands)`,
    );
    expect(b.turns).toBeLessThanOrEqual(s.turns + 2);
  });
});
