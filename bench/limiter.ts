// Limiter benchmark (not a test): `node bin/run-ts.js bench/limiter.ts`. Prints, in one run against the
// same Redis: acquire calls/s against a no-op EVALSHA baseline, budget utilization and violations
// against the simulator (no latency), the 429 share and utilization against a service stricter than
// configured (learned limits), the delay from a permit freeing to the next grant, and the Redis calls a
// waiting worker makes. Every figure is measured here; bench/run-all.ts can import
// runLimiterBench() to put them in one table.
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { request, type Dispatcher } from 'undici';
import { tokenFingerprint } from '../src/core/config.ts';
import type { Rate } from '../src/core/duration.ts';
import { TransferBudget, type Acquired } from '../src/limiter/index.ts';
import { createSimulator } from '../src/simulator/index.ts';
import { deleteKeysUnder as deletePrefix } from '../src/redis/client.ts';
import { isMain, printFigures, round } from './common.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const CONCURRENCY = 32;
const THROUGHPUT_MS = 2000;

type Figures = Record<string, number | string>;

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
}

/** Runs `call` from CONCURRENCY loops for `ms` and returns calls per second. */
async function callsPerSec(call: () => Promise<unknown>, ms = THROUGHPUT_MS): Promise<number> {
  let calls = 0;
  const start = performance.now();
  const end = start + ms;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < end) {
        await call();
        calls++;
      }
    }),
  );
  return calls / ((performance.now() - start) / 1000);
}

function budget(redis: Redis, prefix: string, perToken: Rate, perOrg: Rate, ttl = 5000): TransferBudget {
  return new TransferBudget(redis, {
    prefix,
    limitPerToken: perToken,
    limitPerOrg: perOrg,
    inflightTtlMs: ttl,
  });
}

/** Acquire calls/s, refused (the usual state under load) and granted (+ settle), against EVALSHA `return 1`. */
async function throughput(redis: Redis, prefix: string): Promise<Figures> {
  redis.defineCommand('ltBenchNoop', { numberOfKeys: 0, lua: 'return 1' });
  const noop = redis as unknown as { ltBenchNoop(): Promise<unknown> };
  await noop.ltBenchNoop();
  const baseline = await callsPerSec(() => noop.ltBenchNoop());

  const tokens = ['tok1', 'tok2'];
  const full = budget(
    redis,
    `${prefix}:full`,
    { max: 1, windowMs: 3_600_000 },
    { max: 1000, windowMs: 86_400_000 },
  );
  for (const _ of tokens) {
    const p = await full.acquire('bench', tokens);
    if (p.ok) await full.settle('bench', p.tokenId, p.permitId);
  }
  const refused = await callsPerSec(() => full.acquire('bench', tokens));

  const open = budget(redis, `${prefix}:open`, { max: 1e9, windowMs: 1000 }, { max: 1e9, windowMs: 1000 });
  const grantedCalls = await callsPerSec(async () => {
    const p = await open.acquire('bench', tokens);
    if (p.ok) await open.settle('bench', p.tokenId, p.permitId);
  });
  return {
    'noop EVALSHA calls/s': Math.round(baseline),
    'acquire (refused) calls/s': Math.round(refused),
    'acquire refused / noop': round(refused / baseline, 3),
    'acquire+settle (granted) cycles/s': Math.round(grantedCalls),
    'acquire+settle / noop (calls)': round((2 * grantedCalls) / baseline, 3),
  };
}

/**
 * 10 loops, for `runMs`, of acquire -> PATCH on the simulator -> settle, on the tokens of `secrets` (org
 * acme); a refusal sleeps its wait. `on429` runs after the settle of a call answered 429.
 */
async function transferLoops(
  b: TransferBudget,
  url: string,
  secrets: readonly string[],
  runMs: number,
  on429?: (permit: Acquired, res: Dispatcher.ResponseData) => Promise<void>,
): Promise<void> {
  const ids = secrets.map(tokenFingerprint);
  let learner = 0;
  const stopAt = Date.now() + runMs;
  await Promise.all(
    Array.from({ length: 10 }, async () => {
      while (Date.now() < stopAt) {
        const p = await b.acquire('acme', ids);
        if (!p.ok) {
          await sleep(Math.min(p.waitMs + 1, Math.max(0, stopAt - Date.now())));
          continue;
        }
        const secret = secrets[ids.indexOf(p.tokenId)] ?? '';
        const res = await request(`${url}/1/learner/${(learner++ % 3000) + 1}/transfer`, {
          method: 'PATCH',
          headers: {
            authorization: `Bearer ${secret}`,
            'user-agent': 'learner-transfer bench',
            accept: 'application/json',
            'content-type': 'application/json',
          },
          body: '{}',
        });
        await res.body.text();
        await b.settle('acme', p.tokenId, p.permitId);
        if (res.statusCode === 429 && on429) await on429(p, res);
      }
    }),
  );
}

/**
 * Utilization against the simulator with no latency, rolling window: 10 loops acquire -> PATCH ->
 * settle for 4.5 windows of the org; the most any server allows in that time is ceil(T/W) windows.
 */
async function utilization(redis: Redis, prefix: string): Promise<Figures> {
  const perToken: Rate = { max: 25, windowMs: 1000 };
  const perOrg: Rate = { max: 40, windowMs: 1000 };
  const runMs = 4500;
  const secrets = ['a', 'b'].map((n) => `bench-${n}-${randomBytes(6).toString('hex')}`);
  const sim = createSimulator({
    learners: 3000,
    tokens: secrets.map((token) => ({ token, org: 'acme' })),
    limits: { perToken, perOrg, window: 'rolling' },
  });
  const url = await sim.listen();
  const b = budget(redis, `${prefix}:util`, perToken, perOrg, 3000);
  try {
    await transferLoops(b, url, secrets, runMs);
    const counted = sim.record.filter(
      (r) => r.method === 'PATCH' && r.countedAt !== undefined && r.status !== 429,
    );
    const windows = (rate: Rate) => Math.ceil(runMs / rate.windowMs) * rate.max;
    const bound = Math.min(2 * windows(perToken), windows(perOrg));
    return {
      'utilization (simulator, no latency)': round(counted.length / bound, 4),
      'permits counted / bound': `${counted.length}/${bound}`,
      '429 answers': sim.record.filter((r) => r.status === 429).length,
      'violations (rolling + fixed)': sim.violations('rolling').length + sim.violations('fixed').length,
    };
  } finally {
    await sim.close();
  }
}

/**
 * Against a service stricter than configured (issue 13, item 3): the service allows 10/1s per token, the
 * limiter is configured for 25/1s; 10 loops acquire -> PATCH -> settle, and on a 429 learn (learn.lua)
 * and block the token for Retry-After, as the worker does, for 12 windows. Reports the 429 share and what
 * was counted against the most the service allows in that time.
 */
async function stricter(redis: Redis, prefix: string): Promise<Figures> {
  const service: Rate = { max: 10, windowMs: 1000 };
  const runMs = 12_000;
  const secrets = ['a', 'b'].map((n) => `bench-${n}-${randomBytes(6).toString('hex')}`);
  const ids = secrets.map(tokenFingerprint);
  const sim = createSimulator({
    learners: 3000,
    tokens: secrets.map((token) => ({ token, org: 'acme' })),
    limits: { perToken: service, window: 'rolling' },
  });
  const url = await sim.listen();
  const b = budget(
    redis,
    `${prefix}:strict`,
    { max: 25, windowMs: 1000 },
    { max: 100, windowMs: 1000 },
    3000,
  );
  try {
    await transferLoops(b, url, secrets, runMs, async (p, res) => {
      // As the worker does: learn from the 429, then block the token for its Retry-After.
      await b.learn('acme', p.tokenId, p.permitId, ids.length);
      const seconds = Number(res.headers['retry-after']);
      await b.block('acme', p.tokenId, Number.isFinite(seconds) ? seconds * 1000 : 100, '429');
    });
    const patches = sim.record.filter((r) => r.method === 'PATCH');
    const counted = patches.filter((r) => r.countedAt !== undefined && r.status !== 429);
    const refused = patches.filter((r) => r.status === 429).length;
    const bound = 2 * Math.ceil(runMs / service.windowMs) * service.max;
    const view = await b.peek('acme', ids);
    return {
      'stricter service: 429 share of calls': round(refused / patches.length, 4),
      'stricter service: 429 answers / calls': `${refused}/${patches.length}`,
      'stricter service: utilization of its limit': round(counted.length / bound, 4),
      'stricter service: learned per token (in force at the end)': view.tokens
        .map((t) => (t.learned ? `${t.limit}` : '-'))
        .join(' / '),
    };
  } finally {
    await sim.close();
  }
}

/**
 * Delay from the moment a permit frees to the next grant, for waiters that sleep exactly waitMs: a pure
 * Redis loop that settles at once, token 10/300ms, for 4 s. With one scope, grant k + max reuses the
 * slot of permit k, which frees at its stamp + window + 1; the delay is the gap between the two.
 */
async function freeToGrant(redis: Redis, prefix: string, loops: number): Promise<number[]> {
  const rate: Rate = { max: 10, windowMs: 300 };
  const b = budget(redis, `${prefix}:delay${loops}`, rate, { max: 1e6, windowMs: 300 });
  const grants: number[] = [];
  const stamps: number[] = [];
  const stopAt = Date.now() + 4000;
  await Promise.all(
    Array.from({ length: loops }, async () => {
      while (Date.now() < stopAt) {
        const r = await b.acquire('bench', ['tok1']);
        if (!r.ok) {
          await sleep(r.waitMs);
          continue;
        }
        grants.push(r.now);
        await b.settle('bench', r.tokenId, r.permitId);
        stamps.push(Number(await redis.zscore(b.keys.tokenLog('bench', 'tok1'), r.permitId)));
      }
    }),
  );
  grants.sort((x, y) => x - y);
  stamps.sort((x, y) => x - y);
  const delays: number[] = [];
  for (let k = 0; k + rate.max < grants.length; k++) {
    const delay = (grants[k + rate.max] ?? NaN) - ((stamps[k] ?? NaN) + rate.windowMs + 1);
    if (!(delay >= 0)) throw new Error(`bench: a grant came before its slot was free (${delay} ms)`);
    delays.push(delay);
  }
  return delays.sort((x, y) => x - y);
}

/**
 * Redis calls made while waiting: the budget is full for one 3 s window; waiters sleep the refusal's
 * wait. One loop is what a BullMQ worker amounts to (queue.rateLimit pauses the whole org queue);
 * twenty independent loops show the cost without that coalescing.
 */
async function waiting(
  redis: Redis,
  prefix: string,
  loops: number,
): Promise<{ perSec: number; seconds: number }> {
  const b = budget(redis, `${prefix}:wait${loops}`, { max: 5, windowMs: 3000 }, { max: 1e6, windowMs: 3000 });
  for (let i = 0; i < 5; i++) {
    const p = await b.acquire('bench', ['tok1']);
    if (p.ok) await b.settle('bench', p.tokenId, p.permitId);
  }
  let calls = 0;
  const start = performance.now();
  let firstGrant = Infinity;
  await Promise.all(
    Array.from({ length: loops }, async () => {
      for (;;) {
        const r = await b.acquire('bench', ['tok1']);
        if (r.ok) {
          firstGrant = Math.min(firstGrant, performance.now());
          return;
        }
        calls++;
        if (performance.now() > firstGrant) return;
        await sleep(r.waitMs + 1);
      }
    }),
  );
  const seconds = (firstGrant - start) / 1000;
  return { perSec: calls / seconds, seconds };
}

export async function runLimiterBench(): Promise<Record<string, number | string>> {
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const prefix = `lt-bench-limiter-${randomBytes(4).toString('hex')}`;
  try {
    const figures: Figures = await throughput(redis, prefix);
    Object.assign(figures, await utilization(redis, prefix));
    Object.assign(figures, await stricter(redis, prefix));
    for (const loops of [1, 20]) {
      const d = await freeToGrant(redis, prefix, loops);
      figures[`free->grant p50 ms (${loops} loop${loops > 1 ? 's' : ''})`] = quantile(d, 0.5);
      figures[`free->grant p99 ms (${loops} loop${loops > 1 ? 's' : ''})`] = quantile(d, 0.99);
      figures[`free->grant samples (${loops} loop${loops > 1 ? 's' : ''})`] = d.length;
    }
    const one = await waiting(redis, prefix, 1);
    const twenty = await waiting(redis, prefix, 20);
    figures['waiting worker Redis calls/s (1 loop, BullMQ-coalesced)'] = round(one.perSec, 3);
    figures['waiting Redis calls/s (20 independent loops)'] = round(twenty.perSec, 3);
    figures['waiting period s'] = round(one.seconds, 2);
    return figures;
  } finally {
    await deletePrefix(redis, prefix);
    await redis.quit();
  }
}

if (isMain(import.meta.url))
  printFigures('limiter benchmark (same Redis, same run)', await runLimiterBench());
