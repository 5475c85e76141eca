// One worker process of the multi-process limiter test: LT_LOOPS concurrent loops of
// acquire -> PATCH transfer -> settle (or abandon / release), sleeping exactly the refusal's wait.
// Token secrets come in LT_TOKENS and are never printed: the summary on stdout names fingerprints only.
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { request } from 'undici';
import { tokenFingerprint } from '../../src/core/config.ts';
import { parseRate, type Rate } from '../../src/core/duration.ts';
import { TransferBudget } from '../../src/limiter/index.ts';

function env(name: string): string {
  const value = process.env[name];
  if (value === undefined || value === '') throw new Error(`limiter-load-child: ${name} is required`);
  return value;
}

function rate(name: string): Rate {
  const r = parseRate(env(name));
  if (!r) throw new Error(`limiter-load-child: ${name} must look like 20/2s`);
  return r;
}

const org = env('LT_ORG');
const simUrl = env('LT_SIM_URL');
const secrets = env('LT_TOKENS').split(',');
const byId = new Map(secrets.map((s) => [tokenFingerprint(s), s]));
const tokenIds = [...byId.keys()];
const loops = Number(env('LT_LOOPS'));
const startAt = Number(env('LT_START_AT'));
const stopAt = Number(env('LT_STOP_AT'));
const requestTimeoutMs = Number(env('LT_REQUEST_TIMEOUT_MS'));
const [firstId, lastId] = env('LT_LEARNERS').split('-').map(Number) as [number, number];

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: null });
const budget = new TransferBudget(redis, {
  prefix: env('LT_PREFIX'),
  limitPerToken: rate('LT_LIMIT_TOKEN'),
  limitPerOrg: rate('LT_LIMIT_ORG'),
  inflightTtlMs: Number(env('LT_INFLIGHT_TTL_MS')),
});

const stats = {
  acquires: 0,
  granted: 0,
  refused: 0,
  statuses: {} as Record<string, number>,
  settled: 0,
  abandoned: 0,
  released: 0,
  /**
   * Every permit: [acquired at (Redis ms), token index, no longer counted after (ms, not earlier than
   * the limiter's own stamp: taken after the settle returns, or the in-flight deadline when abandoned)].
   */
  grants: [] as Array<[number, number, number]>,
  /** Every refusal: [at (Redis ms), scope]. */
  refusals: [] as Array<[number, string]>,
};
const inflightTtlMs = Number(env('LT_INFLIGHT_TTL_MS'));
let nextLearner = firstId;

async function transfer(tokenId: string, permitId: string, at: number): Promise<void> {
  const secret = byId.get(tokenId);
  if (secret === undefined) throw new Error('granted a token outside the pool');
  const learnerId = nextLearner;
  nextLearner = nextLearner >= lastId ? firstId : nextLearner + 1;
  try {
    const res = await request(`${simUrl}/1/learner/${learnerId}/transfer`, {
      method: 'PATCH',
      headers: {
        authorization: `Bearer ${secret}`,
        'user-agent': 'learner-transfer limiter load test',
        accept: 'application/json',
        'content-type': 'application/json',
      },
      body: '{}',
      signal: AbortSignal.timeout(requestTimeoutMs),
    });
    await res.body.text();
    stats.statuses[res.statusCode] = (stats.statuses[res.statusCode] ?? 0) + 1;
    await budget.settle(org, tokenId, permitId);
    stats.grants.push([at, tokenIds.indexOf(tokenId), Date.now()]);
    stats.settled++;
  } catch (err) {
    // Refused before a byte went out: the budget comes back. Anything else may have been counted.
    if ((err as { code?: string }).code === 'ECONNREFUSED') {
      await budget.release(org, tokenId, permitId);
      stats.grants.push([at, tokenIds.indexOf(tokenId), Date.now()]);
      stats.released++;
    } else {
      await budget.abandon(org, tokenId, permitId);
      stats.grants.push([at, tokenIds.indexOf(tokenId), Math.max(Date.now(), at + inflightTtlMs)]);
      stats.abandoned++;
    }
  }
}

async function loop(): Promise<void> {
  while (Date.now() < stopAt) {
    stats.acquires++;
    const r = await budget.acquire(org, tokenIds);
    if (r.ok) {
      stats.granted++;
      await transfer(r.tokenId, r.permitId, r.now);
      continue;
    }
    stats.refused++;
    stats.refusals.push([r.now, r.scope]);
    // +1: timers may fire a millisecond early; being refused again would only cost one more call.
    const wait = Math.min(r.waitMs + 1, stopAt - Date.now());
    if (wait > 0) await sleep(wait);
  }
}

await sleep(Math.max(0, startAt - Date.now()));
await Promise.all(Array.from({ length: loops }, loop));
await redis.quit();
process.stdout.write(`${JSON.stringify({ pid: process.pid, tokenIds, ...stats })}\n`);
