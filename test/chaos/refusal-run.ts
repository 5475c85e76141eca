// The run both Redis-refusal files make (redis-refusal.test.ts, redis-refusal-replica.test.ts): a
// redis-server of the test's own, two `work` processes, a refusal that meets calls in flight, then the
// checks of what every refusal must leave (figures()). Two files so that their scenarios run side by side.
import { setTimeout as sleep } from 'node:timers/promises';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, afterEach, expect } from 'vitest';
import { type CliResult, spawnCli, waitExit } from '../helpers/cli.ts';
import { atStake, callsInFlight, expectAtStake, type AtStake } from '../helpers/at-stake.ts';
import { expectOutcomes } from '../helpers/outcomes-check.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';
import { startOwnRedis, type OwnRedis } from '../helpers/redis-server.ts';
import { waitForCount } from '../helpers/wait.ts';

const servers: OwnRedis[] = [];
let h: Harness | undefined;

/** Registers the file's hooks: each test's harness closed after it, the file's Redis servers at its end. */
export function closeAfterTests(): void {
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });
  afterAll(async () => {
    for (const s of servers.splice(0)) await s.close();
  });
}

/** A redis-server of the test's own (startOwnRedis's arguments), stopped at the file's end. */
export async function ownRedis(args?: string[]): Promise<OwnRedis> {
  const redis = await startOwnRedis(args);
  servers.push(redis);
  return redis;
}

// REFUSAL_LEARNERS=1200 reproduces the full-memory run at its size (the figures go to the note).
const LEARNERS = Number(process.env.REFUSAL_LEARNERS ?? 150);
// Two workers of five calls each: at most this many calls hold a permit when Redis starts refusing, and
// no new permit is granted while it refuses (acquiring one is a write), so at most these go out after.
const WORKERS = 2;
const CONCURRENCY = 5;

interface Figures {
  learners: number;
  calls: number;
  calledTwice: number;
  moved: number;
  movedRecordedTransferred: number;
  /** Authorizations the moves revoked (expectOutcomes checked each one is in the audit export). */
  revoked: number;
  logLinesWhileRefused: number;
  callsWhileRefused: number;
}

/** Log lines (JSON, with `time`) of the CLI children written between two moments. */
function linesBetween(outputs: CliResult[], from: number, to: number): number {
  let n = 0;
  for (const o of outputs) {
    for (const line of o.stderr.split('\n')) {
      if (!line.startsWith('{')) continue;
      try {
        const t = (JSON.parse(line) as { time?: number }).time ?? 0;
        if (t >= from && t <= to) n++;
      } catch {
        // not a log line
      }
    }
  }
  return n;
}

/** A harness on `redisUrl` (closed after the test) with LEARNERS of acme enqueued. */
export async function startRun(redisUrl: string, tag: string): Promise<{ harness: Harness; ids: number[] }> {
  // One run a test: a second would leave the first harness open (closeAfterTests closes the last).
  if (h) throw new Error(`startRun(${tag}): this test's harness is still open`);
  const harness = await startHarness({
    tag,
    redisUrl,
    sim: {
      learners: Math.max(500, 2 * LEARNERS),
      repeatMode: 'error',
      faults: { latencyAfterMs: [30, 120] },
    },
    env: {
      LIMIT_PER_TOKEN: '1000/1s',
      LIMIT_PER_ORG: '2000/1s',
      REQUEST_TIMEOUT: '1500ms',
      // Longer than the recorder's retry interval: a live holder records within the grace.
      LEASE_GRACE: '5s',
      LOG_LEVEL: 'info',
    },
  });
  h = harness;
  const ids = learnersNotIn('acme', LEARNERS);
  await harness.enqueueIds(ids);
  return { harness, ids };
}

export const patches = (harness: Harness) => harness.sim.record.filter((r) => r.method === 'PATCH');

/**
 * Waits (failing the test if they never come) for `n` transfer calls, then holds the service's answers
 * and waits for a call in flight: the calls in flight stay so until the returned release is called, so a
 * fault injected before it is sure to meet them, however slow the machine (a call in flight lasts only
 * the service's 30-120 ms latency otherwise, and the run could even end before the fault is in).
 */
export async function holdCallsInFlight(harness: Harness, n: number): Promise<() => void> {
  await waitForCount('transfer calls at the service', () => patches(harness).length, n, {
    // Two `work` processes starting: seconds on a machine as busy as a CI runner can be.
    timeoutMs: 120_000,
  });
  const release = harness.sim.holdAnswers();
  try {
    await waitForCount('transfer calls in flight', () => callsInFlight(harness.sim), 1);
  } catch (err) {
    release();
    throw err;
  }
  return release;
}

/**
 * Runs two workers, refuses writes mid-run for `holdMs`, restores, and checks everything. `refuse` calls
 * `refused()` at the moment Redis starts refusing (in the same tick as the command that does it, or as
 * the check that sees it take effect): what was at stake then is asserted, and the calls the service
 * received from that moment until the restore are the calls sent while Redis refused. The service holds
 * its answers from a moment with a call in flight until `refused()`: keep `refuse` short before it
 * (under the 1.5 s request timeout); `prepare` runs before the workers start.
 */
export async function refusalRun(
  redis: OwnRedis,
  tag: string,
  refuse: (admin: Redis, refused: () => void) => Promise<void>,
  restore: (admin: Redis) => Promise<void>,
  { holdMs = 6000, prepare }: { holdMs?: number; prepare?: (admin: Redis) => Promise<void> } = {},
): Promise<Figures> {
  const { harness, ids } = await startRun(redis.url, tag);
  const admin = new Redis(redis.url, { maxRetriesPerRequest: null });
  admin.on('error', () => {});
  try {
    await prepare?.(admin);
    const workers = [0, 1].map(() =>
      spawnCli(['work', '--until-idle', '--concurrency', String(CONCURRENCY)], harness.env),
    );
    const release = await holdCallsInFlight(harness, 30);
    let stake: AtStake | undefined;
    try {
      await refuse(admin, () => {
        stake = atStake(harness.sim, ids, `the refusal (${tag})`);
        release();
      });
    } finally {
      release();
    }
    if (!stake) throw new Error(`${tag}: refuse() never said when the refusal began`);
    expectAtStake(stake);
    await sleep(Math.max(0, stake.at + holdMs - Date.now()));
    const restoring = Date.now();
    await restore(admin);
    const restoredAt = Date.now();
    // Calls the service received while Redis refused: each must have held its permit before.
    const refusedAt = stake.at;
    const callsWhileRefused = patches(harness).filter(
      (r) => r.receivedAt >= refusedAt && r.receivedAt < restoring,
    ).length;
    const outputs = await Promise.all(workers.map((w) => waitExit(w, 150_000)));
    for (const o of outputs) {
      expect(o.stderr, o.stderr.slice(-3000)).toMatch(/workers stopped \(idle\)/);
      expect(o.code, o.stderr.slice(-3000)).toBe(0);
    }
    // The refusal was said: a worker's gate closed on it and logged so.
    expect(outputs.map((o) => o.stderr).join('')).toMatch(/Redis does not take writes/);
    return await figures(harness, ids, linesBetween(outputs, refusedAt, restoredAt), callsWhileRefused);
  } finally {
    admin.disconnect();
  }
}

export async function figures(
  harness: Harness,
  ids: number[],
  logLinesWhileRefused: number,
  callsWhileRefused: number,
): Promise<Figures> {
  const tally = await expectOutcomes(harness.ctx, harness.sim, { org: 'acme', ids });
  const calls = new Map<number, number>();
  for (const r of harness.sim.record)
    if (r.method === 'PATCH' && r.learnerId !== undefined)
      calls.set(r.learnerId, (calls.get(r.learnerId) ?? 0) + 1);
  const moved = ids.filter((id) => harness.sim.ownerChanges(id) === 1);
  let revoked = 0;
  for (const id of moved) revoked += harness.sim.transfersOf(id)[0]?.data.authorizations.revoked.length ?? 0;
  const f: Figures = {
    learners: ids.length,
    calls: [...calls.values()].reduce((a, b) => a + b, 0),
    calledTwice: [...calls.values()].filter((n) => n > 1).length,
    moved: moved.length,
    movedRecordedTransferred: moved.filter((id) => tally.transferred?.includes(id)).length,
    revoked,
    logLinesWhileRefused,
    callsWhileRefused,
  };
  // Every figure is checked against what the code promises; the line is for the note (REFUSAL_LEARNERS).
  console.log(`[refusal] ${JSON.stringify(f)}`);
  const account = JSON.stringify(f);
  expect(f.calledTwice, `learners called twice: ${account}`).toBe(0);
  // One call per learner: nobody was called twice, and nobody was left uncalled.
  expect(f.calls, `calls: ${account}`).toBe(ids.length);
  expect(f.movedRecordedTransferred, 'learners the tool moved, recorded transferred').toBe(f.moved);
  expect(f.moved).toBe(ids.length);
  // The simulator's seed gives learners authorizations to revoke: the audit check had something to find.
  expect(f.revoked, `authorizations revoked: ${account}`).toBeGreaterThan(0);
  expect(f.logLinesWhileRefused, 'log lines while Redis refused writes').toBeLessThan(100);
  // The gate closed: at most the calls that held a permit when the refusal began went out afterwards.
  expect(f.callsWhileRefused, 'calls sent while Redis refused writes').toBeLessThanOrEqual(
    WORKERS * CONCURRENCY,
  );
  return f;
}

/** Every spool file's text (the entries a killed worker leaves for the next `work`). */
export function spooled(dir: string): string {
  if (!existsSync(dir)) return '';
  return readdirSync(dir)
    .filter((f) => f.endsWith('.spool'))
    .map((f) => readFileSync(join(dir, f), 'utf8'))
    .join('');
}

/** A field of an INFO answer. */
export function infoField(info: string, name: string): string | undefined {
  return new RegExp(`^${name}:(.*?)\\s*$`, 'm').exec(info)?.[1];
}

export async function usedMemory(admin: Redis): Promise<number> {
  const info = await admin.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)?.[1] ?? 0);
}
