// Dashboard benchmark (not a test): `node bin/run-ts.js bench/dashboard.ts`. Seeds 100,000 failed
// learners into the outcome store (through OutcomeStore, as the worker writes them), serves the
// dashboard over real HTTP, and times the failures page and API against /healthz in the same run:
// the ratio says what reading a page of failures costs beyond answering at all. A small run of 50
// failures, older than all of them, times the run filter where the organization's index is big and
// the run's own is small.
import { sseFrames } from '../test/helpers/sse.ts';
import { randomBytes } from 'node:crypto';
import { request } from 'undici';
import { createContext, type AppContext } from '../src/app/context.ts';
import { loadConfig, type Config } from '../src/core/config.ts';
import { buildDashboard } from '../src/dashboard/server.ts';
import { isMain, printFigures, round, type Figures } from './common.ts';
import { deleteKeysUnder } from '../src/redis/client.ts';
import { runCli, runCommand } from '../test/helpers/cli.ts';
import { manyOrgTokens, seedFleet } from '../test/helpers/many-orgs.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const FAILURES = Number(process.env.BENCH_DASHBOARD_FAILURES ?? 100_000);
const SAMPLES = Number(process.env.BENCH_DASHBOARD_SAMPLES ?? 40);
const SMALL_RUN_FAILURES = 50;
const ORGS = Number(process.env.BENCH_DASHBOARD_ORGS ?? 1000);
const PART = process.env.BENCH_DASHBOARD_PART;
const TOKEN = 'bench-dashboard-token-0123456789';
/** How the failures spread over codes, like a bad week: mostly 500s, then unknown ids, then 403s. */
const MIX: [string, number, number][] = [
  ['server-error', 0.5, 500],
  ['not-found', 0.3, 404],
  ['forbidden', 0.2, 403],
];

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
}

async function timeGet(
  base: string,
  path: string,
  samples = SAMPLES,
): Promise<{ p50: number; p95: number; bytes: number }> {
  const times: number[] = [];
  let bytes = 0;
  for (let i = 0; i < samples + 3; i++) {
    const started = performance.now();
    const res = await request(`${base}${path}`, { headers: { authorization: `Bearer ${TOKEN}` } });
    const body = await res.body.text();
    const ms = performance.now() - started;
    if (res.statusCode !== 200) throw new Error(`${path}: HTTP ${res.statusCode}: ${body.slice(0, 200)}`);
    bytes = body.length;
    if (i >= 3) times.push(ms); // the first few warm up the JIT and the connection
  }
  times.sort((a, b) => a - b);
  return { p50: quantile(times, 0.5), p95: quantile(times, 0.95), bytes };
}

export async function runDashboardBench(): Promise<Figures> {
  return {
    ...(PART === 'fleet' ? {} : await runFailuresBench()),
    ...(PART === 'failures' ? {} : await runFleetBench()),
  };
}

/** FAILURES failed learners in `runId` (the MIX of codes) and SMALL_RUN_FAILURES older ones in `smallRun`. */
async function seedFailures(ctx: AppContext, config: Config, runId: string, smallRun: string): Promise<void> {
  await Promise.all(
    Array.from({ length: SMALL_RUN_FAILURES }, (_, i) =>
      ctx.store.recordAttempt('acme', FAILURES + 1 + i, smallRun, {
        bucket: 'not-found',
        code: 'not-found',
        status: 404,
        durationMs: 42,
        countsAsAttempt: true,
      }),
    ),
  );
  const BATCH = 1000;
  for (let first = 1; first <= FAILURES; first += BATCH) {
    const ids = Array.from({ length: Math.min(BATCH, FAILURES - first + 1) }, (_, i) => first + i);
    await ctx.store.markQueued(
      ids.map((learnerId) => ({ org: 'acme', learnerId, runId, source: 'bench.csv', force: false })),
    );
    // Concurrent calls share the connection as a pipeline (ioredis), each the worker's own script.
    await Promise.all(
      ids.map((learnerId) => {
        const share = (learnerId % 100) / 100;
        const [code, , status] = share < 0.5 ? MIX[0]! : share < 0.8 ? MIX[1]! : MIX[2]!;
        return ctx.store.recordAttempt('acme', learnerId, runId, {
          bucket: code as 'server-error',
          code,
          status,
          error: 'Bench',
          message: `seeded failure ${learnerId}`,
          durationMs: 42,
          tokenId: config.tokens[0]?.id,
          countsAsAttempt: true,
        });
      }),
    );
  }
}

async function runFailuresBench(): Promise<Figures> {
  const prefix = `lt-bench-dash-${randomBytes(4).toString('hex')}`;
  const config = loadConfig({
    REDIS_URL,
    QUEUE_PREFIX: prefix,
    LEARNER_API_TOKENS: 'acme:bench-acme-1,acme:bench-acme-2',
    DASHBOARD_TOKEN: TOKEN,
    LOG_LEVEL: 'silent',
  });
  const ctx = await createContext(config);
  const figures: Figures = {};
  try {
    const runId = '20260101T000000-bench';
    const smallRun = '20251231T000000-small';
    await ctx.runs.create({ id: runId, kind: 'csv', source: 'bench.csv', orgs: ['acme'] });
    await ctx.runs.create({ id: smallRun, kind: 'csv', source: 'small.csv', orgs: ['acme'] });
    const seedStarted = performance.now();
    await seedFailures(ctx, config, runId, smallRun);
    figures['failed learners seeded'] = FAILURES;
    figures['seed s'] = round((performance.now() - seedStarted) / 1000, 1);

    const app = await buildDashboard(ctx, { bullBoard: false });
    const base = (await app.listen({ port: 0, host: '127.0.0.1' })).replace(/\/$/, '');
    try {
      const check = await (
        await request(`${base}/api/failures?limit=1`, { headers: { authorization: `Bearer ${TOKEN}` } })
      ).body.json();
      const all = FAILURES + SMALL_RUN_FAILURES;
      if ((check as { total: number }).total !== all)
        throw new Error(`expected ${all} failures, got ${JSON.stringify(check).slice(0, 200)}`);
      const base50 = await timeGet(base, '/healthz');
      const page = await timeGet(base, '/failures');
      const deep = await timeGet(base, `/failures?offset=${FAILURES - 100}`);
      const code = await timeGet(base, '/failures?code=not-found&offset=20000');
      const api = await timeGet(base, '/api/failures?limit=50');
      const run = await timeGet(base, `/api/failures?run=${runId}&code=forbidden&offset=5000`, 10);
      const small = await timeGet(base, `/api/failures?run=${smallRun}`, 10);
      const smallCode = await timeGet(base, `/api/failures?run=${smallRun}&code=not-found`, 10);
      const search = await timeGet(base, `/api/failures?q=${Math.floor(FAILURES / 2)}`);
      const overview = await timeGet(base, '/api/overview');
      figures['baseline /healthz p50 ms'] = round(base50.p50, 2);
      figures['failures page (50 rows) p50 ms'] = round(page.p50, 2);
      figures['failures page p95 ms'] = round(page.p95, 2);
      figures['failures page / healthz (p50 ratio)'] = round(page.p50 / base50.p50, 1);
      figures['last page (offset 99,900) p50 ms'] = round(deep.p50, 2);
      figures['code filter, offset 20,000 p50 ms'] = round(code.p50, 2);
      figures['/api/failures p50 ms'] = round(api.p50, 2);
      figures['run + code filter, offset 5,000 p50 ms'] = round(run.p50, 2);
      figures[`run filter, a run of ${SMALL_RUN_FAILURES} older failures p50 ms`] = round(small.p50, 2);
      figures['the same with code=not-found p50 ms'] = round(smallCode.p50, 2);
      figures['small run filter / healthz (p50 ratio)'] = round(small.p50 / base50.p50, 1);
      figures['learner id search p50 ms'] = round(search.p50, 2);
      figures['/api/overview p50 ms'] = round(overview.p50, 2);
      figures['failures page bytes'] = page.bytes;
    } finally {
      await app.close();
    }
    return figures;
  } finally {
    await deleteKeysUnder(ctx.redis, prefix);
    await ctx.close();
  }
}

/** The first `count` frames of /api/live (their sizes in bytes, the first a newcomer's full one). */
async function liveFrames(base: string, count: number): Promise<number[]> {
  const ac = new AbortController();
  const res = await request(`${base}/api/live`, {
    headers: { authorization: `Bearer ${TOKEN}` },
    signal: ac.signal,
  });
  const sizes: number[] = [];
  try {
    for await (const frame of sseFrames(res.body)) {
      if (frame.event !== undefined) sizes.push(Buffer.byteLength(frame.raw));
      if (sizes.length >= count) break;
    }
  } finally {
    ac.abort();
  }
  return sizes;
}

/** `status` (and `status --json`) run in this process: the p50 of `samples` runs, and the output's size. */
async function timeStatus(
  args: string[],
  env: Record<string, string>,
  samples: number,
): Promise<{ p50: number; bytes: number }> {
  const times: number[] = [];
  let bytes = 0;
  for (let i = 0; i < samples + 1; i++) {
    const started = performance.now();
    const r = await runCommand(args, env);
    const ms = performance.now() - started;
    if (r.code !== 0) throw new Error(`${args.join(' ')}: exit ${r.code}: ${r.stderr.slice(-500)}`);
    bytes = Buffer.byteLength(r.stdout);
    if (i >= 1) times.push(ms);
  }
  times.sort((a, b) => a - b);
  return { p50: quantile(times, 0.5), bytes };
}

async function runFleetBench(): Promise<Figures> {
  const prefix = `lt-bench-fleet-${randomBytes(4).toString('hex')}`;
  const soloPrefix = `${prefix}-solo`;
  const env = {
    REDIS_URL,
    QUEUE_PREFIX: prefix,
    LEARNER_API_TOKENS: manyOrgTokens(ORGS),
    DASHBOARD_TOKEN: TOKEN,
    LOG_LEVEL: 'silent',
  };
  const config = loadConfig(env);
  const ctx = await createContext(config);
  const figures: Figures = {};
  try {
    const seedStarted = performance.now();
    const fleet = await seedFleet(ctx, { working: 40, failing: 10, paused: 5, refused: 5 });
    figures['fleet: organizations'] = fleet.orgs.length;
    figures['fleet: seed s'] = round((performance.now() - seedStarted) / 1000, 1);
    const app = await buildDashboard(ctx, { bullBoard: false, liveIntervalMs: 1000 });
    const base = (await app.listen({ port: 0, host: '127.0.0.1' })).replace(/\/$/, '');
    try {
      const samples = Math.min(SAMPLES, 15);
      const healthz = await timeGet(base, '/healthz', samples);
      const api = await timeGet(base, '/api/overview', samples);
      const page = await timeGet(base, '/', samples);
      figures['fleet: baseline /healthz p50 ms'] = round(healthz.p50, 2);
      figures['fleet: /api/overview p50 ms'] = round(api.p50, 1);
      figures['fleet: /api/overview bytes'] = api.bytes;
      figures['fleet: overview page p50 ms'] = round(page.p50, 1);
      figures['fleet: overview page bytes'] = page.bytes;
      const frames = await liveFrames(base, 3);
      figures['fleet: live first frame bytes'] = frames[0] ?? NaN;
      figures['fleet: live next frames bytes'] = frames.slice(1).join(' / ');
    } finally {
      await app.close();
    }
    const status = await timeStatus(['status'], env, 5);
    const json = await timeStatus(['status', '--json'], env, 3);
    const solo = await timeStatus(
      ['status'],
      { ...env, QUEUE_PREFIX: soloPrefix, LEARNER_API_TOKENS: manyOrgTokens(1) },
      5,
    );
    figures['fleet: status, 1 organization (baseline) p50 ms'] = round(solo.p50, 1);
    figures[`fleet: status p50 ms`] = round(status.p50, 1);
    figures['fleet: status output bytes'] = status.bytes;
    figures['fleet: status --json p50 ms'] = round(json.p50, 1);
    figures['fleet: status beyond 1 organization ms'] = round(status.p50 - solo.p50, 1);
    // As a person runs it: a process of its own, whose start (node, the TypeScript loader) is the baseline.
    const proc = async (e: Record<string, string>) => {
      const times: number[] = [];
      for (let i = 0; i < 3; i++) {
        const started = performance.now();
        const r = await runCli(['status'], e);
        if (r.code !== 0) throw new Error(`status: exit ${r.code}: ${r.stderr.slice(-500)}`);
        times.push(performance.now() - started);
      }
      return times.sort((a, b) => a - b)[1] ?? NaN;
    };
    const soloProc = await proc({ ...env, QUEUE_PREFIX: soloPrefix, LEARNER_API_TOKENS: manyOrgTokens(1) });
    const fleetProc = await proc(env);
    figures['fleet: status process, 1 organization ms'] = round(soloProc, 0);
    figures['fleet: status process ms'] = round(fleetProc, 0);
    return figures;
  } finally {
    await deleteKeysUnder(ctx.redis, prefix);
    await deleteKeysUnder(ctx.redis, soloPrefix);
    await ctx.close();
  }
}

if (isMain(import.meta.url)) {
  printFigures(
    `dashboard benchmark (${PART === 'fleet' ? '' : `${FAILURES} failed learners in Redis; `}${PART === 'failures' ? '' : `${ORGS} organizations; `}same run)`,
    await runDashboardBench(),
  );
}
