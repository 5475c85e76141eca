// A fleet of many organizations in Redis, for the status and overview tests and bench/dashboard.ts: the
// state a reseller's nightly run leaves (most schools done, a few with work, failures, a pause or a
// refused token), written through the store, the producer and the limiter as the tool writes it.
import type { AppContext } from '../../src/app/context.ts';
import { setPaused } from '../../src/limiter/policy-control.ts';
import { countHourly } from '../../src/outcomes/hourly.ts';
import { newRunId } from '../../src/outcomes/runs.ts';

/** `school-0001`, `school-0002`, ... (sorted as numbers sort). */
export function orgName(i: number): string {
  return `school-${String(i + 1).padStart(4, '0')}`;
}

/** LEARNER_API_TOKENS for `count` organizations, one token each (`ORG:TOKEN`, about 30 chars a pair). */
export function manyOrgTokens(count: number): string {
  return Array.from({ length: count }, (_, i) => `${orgName(i)}:tok-${orgName(i)}-s3cr3t`).join(',');
}

export interface FleetShape {
  /** Organizations with learners waiting (jobs in their queues). */
  working: number;
  /** Organizations with final failures and nothing waiting. */
  failing: number;
  /** Organizations paused by a person. */
  paused: number;
  /** Organizations whose token the service refused (401). */
  refused: number;
}

export interface SeededFleet {
  orgs: string[];
  working: string[];
  failing: string[];
  paused: string[];
  refused: string[];
  /** Organizations with nothing to do and nothing to look at. */
  idle: string[];
  runId: string;
}

const DONE_PER_ORG = 3;

/**
 * Every organization gets DONE_PER_ORG learners transferred (counted in this hour's bucket); then, from the
 * end of the list backwards so the ones needing attention are not simply the first pages: `working` get
 * 2 learners queued, `failing` one not-found, `paused` a pause, `refused` a 401 block of their token.
 */
export async function seedFleet(ctx: AppContext, shape: FleetShape): Promise<SeededFleet> {
  const orgs = [...ctx.config.orgs];
  const runId = newRunId();
  await ctx.runs.create({ id: runId, kind: 'csv', source: 'fleet.csv', orgs });
  const learner = (orgIndex: number, j: number) => orgIndex * 100 + j + 1;
  const BATCH = 200;
  for (let first = 0; first < orgs.length; first += BATCH) {
    const slice = orgs.slice(first, first + BATCH);
    const marks = slice.flatMap((org, k) =>
      Array.from({ length: DONE_PER_ORG }, (_, j) => ({
        org,
        learnerId: learner(first + k, j),
        runId,
        source: 'fleet.csv',
        force: false,
      })),
    );
    await ctx.store.markQueued(marks);
    await Promise.all(
      marks.map((m) =>
        ctx.store.recordAttempt(m.org, m.learnerId, runId, {
          bucket: 'transferred',
          code: 'transferred',
          status: 200,
          durationMs: 40,
          countsAsAttempt: true,
        }),
      ),
    );
    await Promise.all(marks.map((m) => countHourly(ctx.redis, ctx.keys, m.org, 'transferred')));
  }
  const pick = (from: number, n: number) =>
    orgs.slice(Math.max(0, orgs.length - from - n), orgs.length - from);
  const working = pick(0, shape.working);
  const failing = pick(shape.working, shape.failing);
  const paused = pick(shape.working + shape.failing, shape.paused);
  const refused = pick(shape.working + shape.failing + shape.paused, shape.refused);
  const indexOf = new Map(orgs.map((o, i) => [o, i]));
  await ctx.producer.add(
    working.flatMap((org) =>
      [DONE_PER_ORG, DONE_PER_ORG + 1].map((j) => ({
        org,
        learnerId: learner(indexOf.get(org) ?? 0, j),
        source: 'fleet.csv',
      })),
    ),
    runId,
  );
  for (const org of failing) {
    const learnerId = learner(indexOf.get(org) ?? 0, DONE_PER_ORG + 2);
    await ctx.store.markQueued([{ org, learnerId, runId, source: 'fleet.csv', force: false }]);
    await ctx.store.recordAttempt(org, learnerId, runId, {
      bucket: 'not-found',
      code: 'not-found',
      status: 404,
      durationMs: 40,
      countsAsAttempt: true,
    });
  }
  for (const org of paused) await setPaused(ctx.redis, ctx.keys, org, null, true, 'test:fleet');
  for (const org of refused) {
    const token = ctx.config.tokens.find((t) => t.org === org);
    if (token) await ctx.budget.block(org, token.id, 'indefinite', '401');
  }
  const attention = new Set([...working, ...failing, ...paused, ...refused]);
  return {
    orgs,
    working,
    failing,
    paused,
    refused,
    idle: orgs.filter((o) => !attention.has(o)),
    runId,
  };
}
