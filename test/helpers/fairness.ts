// Many organizations with work at once, one token each at 10/5s, each organization at 10/10s (the service
// enforces the same), served by one `work` process: what test/e2e/fairness.test.ts asserts and
// bench/fairness.ts reports, counted from the simulator's record of the calls it counted.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { newRunId } from '../../src/outcomes/runs.ts';
import type { RequestRecord } from '../../src/simulator/types.ts';
import { spawnCli, waitExit } from './cli.ts';
import { startHarness, type Harness } from './pipeline.ts';
import { learnersFor, world } from './schools.ts';
import { waitFor } from './wait.ts';

/** Each organization's limit: this many transfers per 10 s window. */
const PER_WINDOW = 10;

export interface FairWorld {
  h: Harness;
  orgs: string[];
  /** What one organization's limit allows in one of its windows (10 per 10 s). */
  perWindow: number;
  /** What the limits allow one organization in the span (perWindow a window). */
  allowed: number;
  spanMs: number;
}

/** The harness, and more learners for each organization than its limits allow in the span. */
export async function fairWorld(n: number, spanMs: number, tag: string): Promise<FairWorld> {
  const windows = Math.ceil(spanMs / 10_000);
  const perOrg = (windows + 1) * PER_WINDOW;
  const organizations = world(n);
  const tokens = organizations.slice(1).map((o) => ({ org: o.key, token: `sim-${o.key}-1` }));
  const h = await startHarness({
    tag,
    sim: {
      organizations,
      learners: (n + 1) * perOrg + 10,
      tokens,
      limits: {
        perToken: { max: 10, windowMs: 5_000 },
        perOrg: { max: PER_WINDOW, windowMs: 10_000 },
        window: 'rolling',
      },
    },
    env: {
      LEARNER_API_TOKENS: tokens.map((t) => `${t.org}:${t.token}`).join(','),
      LIMIT_PER_TOKEN: '10/5s',
      LIMIT_PER_ORG: `${PER_WINDOW}/10s`,
      LOG_LEVEL: 'warn',
      REQUEST_TIMEOUT: '5s',
    },
  });
  const orgs = tokens.map((t) => t.org);
  const runId = newRunId();
  await h.ctx.runs.create({ id: runId, kind: 'csv', source: 'fair.csv', orgs });
  // None of an organization's learners is its own already.
  for (const [i, org] of orgs.entries()) {
    const ids = learnersFor(organizations, i + 1, perOrg, perOrg);
    await h.ctx.producer.add(
      ids.map((learnerId) => ({ org, learnerId, source: 'fair.csv' })),
      runId,
    );
  }
  return { h, orgs, perWindow: PER_WINDOW, allowed: windows * PER_WINDOW, spanMs };
}

export interface FairSpan {
  /** Counted transfer calls in the span, which starts at the first of any organization. */
  calls: RequestRecord[];
  perOrg: Map<string, number>;
  /** Each organization's first counted transfer, in ms after the first of any. */
  firstAfter: Map<string, number>;
  /** How `work` ended after SIGTERM. */
  exitCode: number | null;
  /** What `work` wrote on stderr (LOG_LEVEL warn: its warnings and errors). */
  stderr: string;
  /** The first counted transfer of any, on the simulator's clock. */
  t0: number;
}

/**
 * For a failure's message: each of `orgs`' first transfer, its counted transfers by 5 s of the span,
 * the service's slowest answer to it, its calls that ended otherwise than transferred, and the last
 * lines `work` logged.
 */
export function spanDetail(w: FairWorld, span: FairSpan, orgs: readonly string[]): string {
  const buckets = Math.ceil(w.spanMs / 5_000);
  const lines = orgs.map((org) => {
    const by = Array.from({ length: buckets }, () => 0);
    for (const r of span.calls.filter((c) => c.org === org)) {
      const at = Math.floor(((r.countedAt as number) - span.t0) / 5_000);
      by[at] = (by[at] ?? 0) + 1;
    }
    const other = w.h.sim.record
      .filter((r) => r.org === org && r.method === 'PATCH' && r.result !== 'transferred')
      .map((r) => `${r.result ?? r.status}@${r.receivedAt - span.t0}`);
    // The service's slowest answer to it: a stalled simulator shows here, a stalled worker does not.
    const slowest = Math.max(
      0,
      ...span.calls.filter((c) => c.org === org).map((c) => (c.respondedAt ?? c.receivedAt) - c.receivedAt),
    );
    return `${org}: first at ${span.firstAfter.get(org)} ms, by 5 s [${by.join(' ')}], slowest answer ${slowest} ms${other.length ? `, other: ${other.join(' ')}` : ''}`;
  });
  return [...lines, 'work stderr (tail):', ...span.stderr.trim().split('\n').slice(-15)].join('\n');
}

/**
 * Where the span's `work` keeps its spool: in memory (/dev/shm), so that no disk stall of the machine
 * reaches its fsync. One did in a CI run (a read storm, 20 processes blocked for 10 s): the attached
 * lanes' time slices ran out while their answers waited on the spool, they gave way after a call or
 * two, and nine organizations missed most of their last window (an fsync held 4 s at 21 s of the span,
 * by strace's fault injection, does the same to every organization attached then). What the disk does
 * to the spool is the guarantees' tests' to say; this one is about sharing.
 */
function memorySpool(): string {
  if (!existsSync('/dev/shm'))
    throw new Error('fairness: needs /dev/shm (a tmpfs) for the spool of its work');
  return mkdtempSync(join('/dev/shm', 'lt-fair-spool-'));
}

/** One `work` process (default connection cap) for the span, then SIGTERM; the calls it made, tallied. */
export async function runFairSpan(w: FairWorld): Promise<FairSpan> {
  const { h, spanMs } = w;
  const spool = memorySpool();
  const work = spawnCli(['work'], { ...h.env, CONCURRENCY: '10', SPOOL_DIR: join(spool, 'spool') });
  const counted = () => h.sim.record.filter((r) => r.method === 'PATCH' && r.countedAt !== undefined);
  const t0 = (await waitFor(
    'the first transfer',
    () => counted()[0]?.countedAt,
    (t) => t !== undefined,
    { timeoutMs: 30_000, everyMs: 20 },
  )) as number;
  await new Promise((r) => setTimeout(r, t0 + spanMs + 500 - Date.now()));
  work.kill('SIGTERM');
  const { code, stderr } = await waitExit(work, 30_000);
  rmSync(spool, { recursive: true, force: true });
  const calls = counted().filter((r) => (r.countedAt as number) < t0 + spanMs);
  const perOrg = new Map<string, number>();
  const firstAfter = new Map<string, number>();
  for (const r of calls) {
    const org = r.org as string;
    perOrg.set(org, (perOrg.get(org) ?? 0) + 1);
    if (!firstAfter.has(org)) firstAfter.set(org, (r.countedAt as number) - t0);
  }
  return { calls, perOrg, firstAfter, exitCode: code, stderr, t0 };
}
