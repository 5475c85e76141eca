// ETA benchmark (not a test): `node bin/run-ts.js bench/eta.ts`. 1,000 organizations of 2 tokens each,
// every window well used (200 permits in each organization's day, 60 in each token's hour, spread over
// the window) and 20,000 learners queued in each: what the exact ETA costs `status`. The peek of every
// organization without the frees (what status read before) is the baseline; then the frees read after
// it (peek-frees.lua), the simulations alone, and `status` (collectStatus) whole. The budget: 300 ms for status.
import { randomBytes } from 'node:crypto';
import { createContext } from '../src/app/context.ts';
import { loadConfig, tokensOf } from '../src/core/config.ts';
import { FREE_STEPS } from '../src/limiter/budget-schedule.ts';
import { etaOf } from '../src/ops/eta/eta.ts';
import { collectStatus } from '../src/ops/views/status.ts';
import { deleteKeysUnder } from '../src/redis/client.ts';
import { orgName } from '../test/helpers/many-orgs.ts';
import { isMain, printFigures, round, type Figures } from './common.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const ORGS = Number(process.env.BENCH_ETA_ORGS ?? 1000);
const SAMPLES = Number(process.env.BENCH_ETA_SAMPLES ?? 9);
const QUEUED = 20_000;
const DAY = 86_400_000;
const HOUR = 3_600_000;

async function p50(samples: number, fn: () => Promise<unknown>): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < samples + 1; i++) {
    const started = performance.now();
    await fn();
    if (i > 0) times.push(performance.now() - started); // the first warms up the JIT and the scripts
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)] ?? NaN;
}

export async function runEtaBench(): Promise<Figures> {
  const prefix = `lt-bench-eta-${randomBytes(4).toString('hex')}`;
  const orgs = Array.from({ length: ORGS }, (_, i) => orgName(i));
  const config = loadConfig({
    REDIS_URL,
    QUEUE_PREFIX: prefix,
    LEARNER_API_TOKENS: orgs.map((o) => `${o}:tok-a-${o}-s3cr3t,${o}:tok-b-${o}-s3cr3t`).join(','),
    LIMIT_PER_TOKEN: '100/1h',
    LIMIT_PER_ORG: '1000/1d',
    LOG_LEVEL: 'silent',
  });
  const ctx = await createContext(config);
  const figures: Figures = {};
  try {
    const now = Date.now();
    const scopes = orgs.map((org) => ({ org, tokenIds: tokensOf(config, org).map((t) => t.id) }));
    const seedStarted = performance.now();
    for (let first = 0; first < scopes.length; first += 100) {
      const pipe = ctx.redis.pipeline();
      for (const { org, tokenIds } of scopes.slice(first, first + 100)) {
        const spread = (key: string, n: number, windowMs: number) =>
          pipe.zadd(key, ...Array.from({ length: n }, (_, i) => [now - (windowMs * i) / n, `p${i}`]).flat());
        spread(ctx.keys.orgLog(org), 200, DAY);
        for (const id of tokenIds) spread(ctx.keys.tokenLog(org, id), 60, HOUR);
        pipe.hset(ctx.keys.orgCounts(org), 'queued', QUEUED);
      }
      await pipe.exec();
    }
    figures['eta: organizations'] = ORGS;
    figures['eta: seed s'] = round((performance.now() - seedStarted) / 1000, 1);
    const plain = await p50(SAMPLES, () => ctx.budget.peekMany(scopes));
    const peeked = await ctx.budget.peekMany(scopes);
    // What status reads after the peek, for the organizations it simulates (all of them here).
    const readFrees = () =>
      ctx.budget.peekFreesMany(
        scopes.map((s, i) => ({ ...s, view: peeked[i] as (typeof peeked)[number] })),
        FREE_STEPS,
      );
    const frees = await p50(SAMPLES, readFrees);
    const freesRead = await readFrees();
    const views = peeked.map((v, i) => ({ ...v, frees: freesRead[i] }));
    const simulate = await p50(SAMPLES, async () => views.map((v) => etaOf(v, QUEUED)));
    const million = await p50(3, async () => views.map((v) => etaOf(v, 1_000_000)));
    const status = await p50(SAMPLES, () => collectStatus(ctx));
    const sample = (await collectStatus(ctx, [orgs[0] as string])).orgs[0]?.eta.text ?? '';
    figures['eta: peek of every organization p50 ms (baseline, no frees)'] = round(plain, 1);
    figures['eta: frees of every organization (peek-frees.lua) p50 ms'] = round(frees, 1);
    figures['eta: frees / baseline'] = round(frees / plain, 2);
    figures[`eta: simulations, ${QUEUED} learners each, p50 ms`] = round(simulate, 1);
    figures['eta: simulations, 1,000,000 learners each, p50 ms'] = round(million, 1);
    figures['eta: status (collectStatus) p50 ms'] = round(status, 1);
    figures['eta: one organization says'] = sample;
    return figures;
  } finally {
    await deleteKeysUnder(ctx.redis, prefix);
    await ctx.close();
  }
}

if (isMain(import.meta.url)) {
  printFigures(`ETA benchmark (${ORGS} organizations, full windows, same run)`, await runEtaBench());
}
