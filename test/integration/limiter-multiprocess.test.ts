// Four worker processes, twenty loops each, share one organization's budget through Redis while the
// simulator counts every request somewhere inside a random latency. The server must never see a window
// over its limit (rolling, then fixed windows), and the budget must still be spent almost entirely.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import type { Rate } from '../../src/core/duration.ts';
import { formatRate } from '../../src/core/duration.ts';
import { createSimulator, type RequestRecord } from '../../src/simulator/index.ts';
import { deletePrefix, dumpPrefix, newRedis, randomPrefix } from '../helpers/redis.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const PROCESSES = 4;
const LOOPS = 20;
const LEARNERS = 5000;
const RUN_MS = 12_000;
const PER_TOKEN: Rate = { max: 20, windowMs: 2000 };
// Two tokens could send 20/s; the org allows 12/s: the tokens bind in the first bursts, the org after.
const PER_ORG: Rate = { max: 60, windowMs: 5000 };
const LATENCY: [number, number] = [0, PER_TOKEN.windowMs / 4];
const REQUEST_TIMEOUT_MS = 1500;
const INFLIGHT_TTL_MS = 3000;

const redis = newRedis();
const prefix = randomPrefix('limiter-mp');

afterAll(async () => {
  await deletePrefix(redis, prefix);
  await redis.quit();
});

interface ChildResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

function runChild(env: Record<string, string>): Promise<ChildResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['bin/run-ts.js', 'test/helpers/limiter-load-child.ts'], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Most counted requests in any window [t, t + windowMs) that starts at one of them. */
function peak(times: number[], windowMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let best = 0;
  let j = 0;
  for (let i = 0; i < sorted.length; i++) {
    while (j < sorted.length && (sorted[j] ?? 0) < (sorted[i] ?? 0) + windowMs) j++;
    best = Math.max(best, j - i);
  }
  return best;
}

interface ChildStats {
  granted: number;
  refused: number;
  grants: Array<[number, number, number]>;
  refusals: Array<[number, string]>;
}

/**
 * The refusals the limiter made while it had room: a refusal at t is right only when the organization's
 * window was full at t, or every token's was. A permit holds its slot from its acquire to one window
 * after its end (its response stamp; its in-flight deadline when abandoned); the children take each end
 * after the limiter's own stamp, so a slot is counted here at least as long as in Redis, and a refusal
 * named here had a free slot for certain.
 */
function refusalsWithRoom(
  children: readonly ChildStats[],
): Array<{ at: number; org: number; tokens: number[] }> {
  const grants = children.flatMap((c) => c.grants);
  const held = (t: number, token?: number) =>
    grants.filter(
      ([at, i, end]) => at <= t && t <= end + windowOf(token) && (token === undefined || i === token),
    ).length;
  const wrong: Array<{ at: number; org: number; tokens: number[] }> = [];
  for (const [at] of children.flatMap((c) => c.refusals)) {
    const org = held(at);
    const tokens = [0, 1].map((i) => held(at, i));
    if (org < PER_ORG.max && tokens.some((n) => n < PER_TOKEN.max)) wrong.push({ at, org, tokens });
  }
  return wrong;
}

function windowOf(token: number | undefined): number {
  return token === undefined ? PER_ORG.windowMs : PER_TOKEN.windowMs;
}

/**
 * Share of the scope's slot-time in use over [from, to]: a counted request holds one of `max` slots from
 * its arrival until one window after its answer (the server saw it somewhere in between; the limiter
 * must assume the latest). Latency makes each permit hold a slot longer, so this, not the count alone,
 * shows whether the limiter left budget idle while there was work.
 */
function occupancy(records: readonly RequestRecord[], rate: Rate, from: number, to: number): number {
  const events: Array<[number, number]> = [];
  for (const r of records) {
    events.push([Math.max(from, r.receivedAt), 1]);
    events.push([Math.min(to, (r.respondedAt ?? to) + rate.windowMs), -1]);
  }
  events.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let busy = 0;
  let last = from;
  let area = 0;
  for (const [t, delta] of events) {
    if (t > last) area += Math.min(busy, rate.max) * (t - last);
    last = Math.max(last, t);
    busy += delta;
  }
  return area / (rate.max * (to - from));
}

describe.each(['rolling', 'fixed'] as const)('limiter shared by worker processes, %s window', (window) => {
  it(`keeps a ${window}-window server under its limits and spends the budget`, async () => {
    const secrets = [1, 2].map((n) => `mp-secret-${n}-${randomBytes(8).toString('hex')}`);
    const sim = createSimulator({
      learners: LEARNERS,
      tokens: secrets.map((token) => ({ token, org: 'acme' })),
      limits: { perToken: PER_TOKEN, perOrg: PER_ORG, window },
      faults: { latencyBeforeMs: LATENCY, latencyAfterMs: LATENCY },
    });
    const url = await sim.listen();
    try {
      const startAt = Date.now() + 3000; // every child started and connected by then
      const stopAt = startAt + RUN_MS;
      const runPrefix = `${prefix}-${window}`;
      const per = Math.floor(LEARNERS / PROCESSES);
      const results = await Promise.all(
        Array.from({ length: PROCESSES }, (_, i) =>
          runChild({
            LT_PREFIX: runPrefix,
            LT_ORG: 'acme',
            LT_SIM_URL: url,
            LT_TOKENS: secrets.join(','),
            LT_LIMIT_TOKEN: formatRate(PER_TOKEN),
            LT_LIMIT_ORG: formatRate(PER_ORG),
            LT_INFLIGHT_TTL_MS: String(INFLIGHT_TTL_MS),
            LT_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
            LT_LOOPS: String(LOOPS),
            LT_START_AT: String(startAt),
            LT_STOP_AT: String(stopAt),
            LT_LEARNERS: `${i * per + 1}-${(i + 1) * per}`,
          }),
        ),
      );
      for (const r of results) {
        expect(r.stderr).toBe('');
        expect(r.code).toBe(0);
        for (const s of secrets) expect(r.stdout + r.stderr).not.toContain(s);
      }
      const children = results.map((r) => JSON.parse(r.stdout) as ChildStats);

      const transfers = sim.record.filter((r: RequestRecord) => r.method === 'PATCH');
      const counted = transfers.filter((r) => r.countedAt !== undefined && r.status !== 429);
      const granted = children.reduce((n, c) => n + c.granted, 0);
      const refusals = children.reduce((n, c) => n + c.refused, 0);
      expect(transfers.filter((r) => r.status === 429)).toEqual([]);
      expect(transfers.filter((r) => r.status === 'reset' || r.status === 0)).toEqual([]);
      expect(sim.violations('rolling')).toEqual([]);
      expect(sim.violations('fixed')).toEqual([]);
      expect(counted).toHaveLength(granted);

      // The most any server could count in the run: ceil(T/W) full windows per scope.
      const windows = (rate: Rate) => Math.ceil(RUN_MS / rate.windowMs) * rate.max;
      const bound = Math.min(2 * windows(PER_TOKEN), windows(PER_ORG));
      const times = counted.map((r) => r.countedAt ?? 0);
      const tokenPeaks = ['acme#1', 'acme#2'].map((label) =>
        peak(
          counted.filter((r) => r.tokenLabel === label).map((r) => r.countedAt ?? 0),
          PER_TOKEN.windowMs,
        ),
      );
      const orgPeak = peak(times, PER_ORG.windowMs);
      const utilization = granted / bound;
      const orgOccupancy = occupancy(counted, PER_ORG, startAt, stopAt);
      console.log(
        `[limiter ${window}] ${PROCESSES}x${LOOPS} loops, ${RUN_MS} ms: ${granted} counted of at most ${bound} ` +
          `(utilization ${utilization.toFixed(3)}, org slot occupancy ${orgOccupancy.toFixed(3)}), busiest windows: tokens ${tokenPeaks.join('/')} of ` +
          `${PER_TOKEN.max}, org ${orgPeak} of ${PER_ORG.max}; ${refusals} refusals, 0 x 429, 0 violations`,
      );
      // Both scopes were filled to the limit at some point, and the org's slots were almost never idle
      // (they are, at the start, while the tokens bind). The count itself stays below the bound by
      // the latency: a permit holds its slot from acquire to one window after its response.
      expect(orgPeak).toBe(PER_ORG.max);
      expect(Math.max(...tokenPeaks)).toBe(PER_TOKEN.max);
      // What the limiter promises is that it spends the budget: it refuses only when a window is full
      // (the organization's, or every token's). Checked on every refusal from the recorded permits, not
      // from the share of the budget spent: that share (0.92 and 0.89 on an idle machine) also measures
      // how fast four loaded processes loop, and fell to 0.72 on a busy two-core box with nothing wrong.
      expect(children.reduce((n, c) => n + c.grants.length, 0)).toBe(granted);
      expect(children.reduce((n, c) => n + c.refusals.length, 0)).toBe(refusals);
      expect(refusals).toBeGreaterThan(0);
      expect(refusalsWithRoom(children).slice(0, 5)).toEqual([]);

      const stored = (await dumpPrefix(redis, runPrefix)).join('\n');
      for (const s of secrets) expect(stored).not.toContain(s);
    } finally {
      await sim.close();
    }
  }, 40_000);
});
