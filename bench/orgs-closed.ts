// Work waiting, nothing allowed: what a `work` process costs while every organization has learners
// queued and may not send (decision 12, for the run windows and the pacing buckets). For 1
// and 1,000 organizations of one token each (BENCH_ORGS, as bench/orgs.ts), ONE `work` process on a
// redis-server of the bench's own (bench/orgs-fleet.ts), two learners queued per organization, and:
//   closed   every organization's run window opened and closed an hour ago (`limits set --run-window`
//            through setLimits, as an operator does, while `work` runs): it opens again in about 22 h;
//   spent    the windows open, each token at 2/1h with a burst of 1 (LIMIT_PER_TOKEN, LIMIT_BURST): the
//            first learner is sent, the second waits 30 min for the token's bucket.
// Once every lane was tried and detached (each organization waits in LanesDue for hours or minutes, the
// process's connections are steady, a second goes by with next to no commands), and at least
// BENCH_ORGS_WARMUP_S (35) after `work` started (past its first token-file reload), over an idle window
// of BENCH_ORGS_IDLE_S (30):
//   idle cmds/s   commands Redis processed, the bench's own readings left out, and which ones they were
//                 (INFO commandstats): flat means the same as an idle fleet, about 0.1/s, whatever the count;
//   idle CPU %    the process's utime + stime over the window, as a share of one core;
//   connections   its Redis connections (CLIENT LIST, the bench's own left out).
// Also checked, or the row fails: the service saw no call while closed and exactly one per organization
// when spent, and none during the idle window. BENCH_ORGS_CLOSED_VARIANTS=closed,spent picks the variants.
// An idle window that reaches the audit archive's first pass (BENCH_ORGS_ARCHIVE_INTERVAL, 5 min after the
// start) also holds, in the spent variant, the archive of the transfers sent: done once, not a poll.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AppContext } from '../src/app/context.ts';
import { setLimits } from '../src/limiter/policy-control.ts';
import { checkTimeZone, formatRunWindow, parseRunWindow } from '../src/limiter/run-window.ts';
import { isMain, round, type Figures } from './common.ts';
import {
  alive,
  benchContext,
  closeFleet,
  enqueueLearners,
  openFleet,
  settle,
  stderrTail,
  type Fleet,
} from './orgs-fleet.ts';
import { commandCounts, commandsBetween, procSample } from './orgs-probes.ts';
import { orgKeys, tokenEnv, tokenFileSupported, tokensFor } from './orgs-tokens.ts';

export const VARIANTS = ['closed', 'spent'] as const;
export type Variant = (typeof VARIANTS)[number];

const DEFAULT_SIZES = [1, 1000];
const HOUR_MS = 3_600_000;
/** The spent variant's limits: one permit from a full bucket, then the next one 30 minutes later. */
const SPENT_ENV = { LIMIT_PER_TOKEN: '2/1h', LIMIT_BURST: '1' };
/** A lane counts as waiting when it is due no sooner than this (closed: ~22 h away; spent: ~30 min). */
const MIN_WAIT_MS: Record<Variant, number> = { closed: 2 * HOUR_MS, spent: 10 * 60_000 };

export interface Settings {
  sizes: number[];
  variants: Variant[];
  idleS: number;
  /** The idle window starts no sooner than this after `work` started (its first token-file reload is past). */
  warmupS: number;
}

export interface ClosedRow {
  variant: Variant;
  orgs: number;
  tokensVia?: string;
  /** From `work` spawned to its first settle (nothing queued yet). */
  startS?: number;
  /** From the first window written (or the enqueue) to every lane detached and the process quiet. */
  settleS?: number;
  /** Transfer calls the service saw before the idle window. */
  calls?: number;
  /** The shortest and longest time until a lane is due again, in hours, once settled. */
  waitH?: [number, number];
  connections?: number;
  connectionNames?: Record<string, number>;
  idleCmdsPerS?: number;
  /** The commands of the idle window, most called first. */
  idleCommands?: Record<string, number>;
  idleCpuPct?: number;
  rssMb?: number;
  /** The whole row, from the fleet opened to it closed. */
  wallS?: number;
  failure?: string;
}

function envNumber(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number): number {
  const n = Number(env[name] ?? fallback);
  if (!Number.isFinite(n) || n < min) throw new Error(`${name}: expected a number >= ${min}`);
  return n;
}

export function settingsFromEnv(env: NodeJS.ProcessEnv = process.env): Settings {
  const sizes = env.BENCH_ORGS?.split(',').map((s) => Number(s.trim())) ?? DEFAULT_SIZES;
  if (sizes.some((n) => !Number.isSafeInteger(n) || n < 1 || n > 99_999))
    throw new Error('BENCH_ORGS: expected organization counts from 1 to 99999, like 1,1000');
  const variants = (env.BENCH_ORGS_CLOSED_VARIANTS?.split(',').map((s) => s.trim()) ?? [
    ...VARIANTS,
  ]) as Variant[];
  if (variants.length === 0 || variants.some((v) => !VARIANTS.includes(v)))
    throw new Error(`BENCH_ORGS_CLOSED_VARIANTS: expected some of ${VARIANTS.join(',')}`);
  return {
    sizes,
    variants,
    idleS: envNumber(env, 'BENCH_ORGS_IDLE_S', 30, 1),
    warmupS: envNumber(env, 'BENCH_ORGS_WARMUP_S', 35, 0),
  };
}

/** Every organization's lanes are tried one after the other, at most REDIS_MAX_CONNECTIONS at once. */
const settleTimeoutMs = (orgs: number) => 60_000 + 30 * orgs;

const two = (n: number) => String(n).padStart(2, '0');
const hhmm = (ms: number) => `${two(new Date(ms).getUTCHours())}:${two(new Date(ms).getUTCMinutes())}`;

/**
 * A daily window (UTC) that opened two hours ago and closed one hour ago, in the canonical text
 * setLimits takes: it opens again in about 22 h. Across midnight it is written as the parser reads it.
 */
export function windowClosedSince(nowMs: number): string {
  return formatRunWindow(parseRunWindow(`all ${hhmm(nowMs - 2 * HOUR_MS)}-${hhmm(nowMs - HOUR_MS)}`));
}

/** Closes every organization's run window the way `limits set --run-window` does, 100 at a time. */
async function closeWindows(ctx: AppContext, orgs: readonly string[]): Promise<void> {
  const windows = windowClosedSince(Date.now());
  const runWindow = { windows, tz: checkTimeZone('UTC') };
  for (let i = 0; i < orgs.length; i += 100) {
    await Promise.all(
      orgs
        .slice(i, i + 100)
        .map((org) => setLimits(ctx.redis, ctx.keys, org, { runWindow }, ctx.config, 'bench orgs-closed')),
    );
  }
}

/** The times (ms from now) until each organization's lane is due again; missing lanes are left out. */
async function laneWaits(fleet: Fleet, key: string, orgs: ReadonlySet<string>): Promise<number[]> {
  const flat = await fleet.monitor.zrange(key, 0, -1, 'WITHSCORES');
  const now = Date.now();
  const out: number[] = [];
  for (let i = 0; i + 1 < flat.length; i += 2)
    if (orgs.has(flat[i] as string)) out.push(Number(flat[i + 1]) - now);
  return out;
}

/** Waits until every organization's lane waits at least `minWaitMs` (it was tried and detached). */
async function waitAllDetached(
  fleet: Fleet,
  key: string,
  orgs: ReadonlySet<string>,
  variant: Variant,
  timeoutMs: number,
): Promise<number[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (!alive(fleet)) throw new Error(`work exited (${fleet.work.exitCode}): ${stderrTail(fleet)}`);
    const waits = await laneWaits(fleet, key, orgs);
    const waiting = waits.filter((w) => w >= MIN_WAIT_MS[variant]);
    const calls = fleet.sim.record.length;
    const callsDone = variant === 'closed' || calls >= orgs.size;
    if (waiting.length === orgs.size && callsDone) return waits;
    if (Date.now() > deadline)
      throw new Error(
        `not every lane detached in ${timeoutMs / 1000} s (${waiting.length} of ${orgs.size} waiting, ${calls} calls)`,
      );
    await sleep(500);
  }
}

/** Why the service's record is wrong for the variant, or undefined. */
function wrongCalls(variant: Variant, calls: number, orgs: number): string | undefined {
  if (variant === 'closed' && calls > 0) return `${calls} transfer calls while every run window was closed`;
  if (variant === 'spent' && calls !== orgs)
    return `${calls} transfer calls for ${orgs} organizations (expected one each: a burst of 1)`;
  return undefined;
}

async function idleFigures(fleet: Fleet, idleS: number, row: ClosedRow): Promise<void> {
  const c0 = await commandCounts(fleet.monitor);
  const p0 = procSample(fleet.pid);
  const calls0 = fleet.sim.record.length;
  const t0 = performance.now();
  await sleep(idleS * 1000);
  const p1 = procSample(fleet.pid);
  const c1 = await commandCounts(fleet.monitor);
  const s = (performance.now() - t0) / 1000;
  if (!p0 || !p1) throw new Error('work exited during the idle window');
  row.idleCmdsPerS = round((c1.total - c0.total - fleet.readingCost) / s, 1);
  row.idleCommands = commandsBetween(c0, c1, fleet.readingCost);
  row.idleCpuPct = round(((p1.cpuS - p0.cpuS) / s) * 100, 2);
  row.rssMb = round(p1.rssKb / 1024, 0);
  const during = fleet.sim.record.length - calls0;
  if (during > 0) throw new Error(`${during} transfer calls during the idle window`);
}

async function fleetFigures(fleet: Fleet, variant: Variant, s: Settings, row: ClosedRow): Promise<void> {
  const spawned = performance.now();
  await settle(fleet, settleTimeoutMs(row.orgs));
  row.startS = round((performance.now() - spawned) / 1000, 1);
  const orgs = fleet.tokens.map((t) => t.org);
  const started = performance.now();
  const ctx = await benchContext(fleet);
  const lanesKey = ctx.keys.lanesDue();
  try {
    if (variant === 'closed') await closeWindows(ctx, orgs);
    await enqueueLearners(fleet, ctx);
  } finally {
    // Its connection would count as the process's in CLIENT LIST.
    await ctx.close();
  }
  const timeout = settleTimeoutMs(row.orgs);
  await waitAllDetached(fleet, lanesKey, new Set(orgs), variant, timeout);
  const clients = await settle(fleet, timeout);
  row.settleS = round((performance.now() - started) / 1000, 1);
  row.connections = clients.count;
  row.connectionNames = clients.byName;
  row.calls = fleet.sim.record.length;
  const wrong = wrongCalls(variant, row.calls, row.orgs);
  if (wrong) throw new Error(wrong);
  const waits = await laneWaits(fleet, lanesKey, new Set(orgs));
  row.waitH = [round(Math.min(...waits) / HOUR_MS, 2), round(Math.max(...waits) / HOUR_MS, 2)];
  const warm = s.warmupS * 1000 - (performance.now() - spawned);
  await sleep(Math.max(2000, warm));
  await idleFigures(fleet, s.idleS, row);
}

export async function measureRow(variant: Variant, orgs: number, s: Settings): Promise<ClosedRow> {
  const row: ClosedRow = { variant, orgs };
  const began = performance.now();
  const dir = mkdtempSync(join(tmpdir(), 'lt-bench-orgs-closed-tokens-'));
  try {
    const tokens = tokensFor(orgKeys(orgs));
    const te = tokenEnv(tokens, dir, tokenFileSupported());
    if (!te.ok) return { ...row, failure: te.why };
    row.tokensVia = te.via;
    const env = variant === 'spent' ? SPENT_ENV : {};
    const fleet = await openFleet({ tokens, tokenEnv: te.env, learnersPerOrg: 2, concurrency: 2, env });
    try {
      await fleetFigures(fleet, variant, s, row);
    } catch (err) {
      row.failure = (err as Error).message;
    } finally {
      await closeFleet(fleet);
    }
    return row;
  } finally {
    rmSync(dir, { recursive: true, force: true });
    row.wallS = round((performance.now() - began) / 1000, 1);
  }
}

const cell = (v: number | string | undefined) => (v === undefined ? '-' : String(v));

/** The idle window's commands as `evalsha 2, zrange 1`, the most called first. */
export function commandsText(commands: Record<string, number> | undefined, top = 6): string | undefined {
  if (!commands) return undefined;
  const list = Object.entries(commands);
  if (list.length === 0) return 'none';
  const shown = list.slice(0, top).map(([n, c]) => `${n} ${c}`);
  return list.length > top ? `${shown.join(', ')}, ...` : shown.join(', ');
}

const waitText = (w: [number, number] | undefined) =>
  w === undefined ? undefined : w[0] === w[1] ? `${w[0]} h` : `${w[0]}-${w[1]} h`;

export function markdownRows(rows: readonly ClosedRow[]): string {
  const lines = [
    '| variant | organizations | Redis connections | Redis commands/s | commands of the idle window | CPU | RSS | calls sent | lanes due again in | settle s | row s | note |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const r of rows) {
    lines.push(
      `| ${r.variant} | ${r.orgs} | ${cell(r.connections)} | ${cell(r.idleCmdsPerS)} | ${cell(commandsText(r.idleCommands))} | ${r.idleCpuPct === undefined ? '-' : `${r.idleCpuPct}%`} | ${r.rssMb === undefined ? '-' : `${r.rssMb} MB`} | ${cell(r.calls)} | ${cell(waitText(r.waitH))} | ${cell(r.settleS)} | ${cell(r.wallS)} | ${r.failure ?? ''} |`,
    );
  }
  return lines.join('\n');
}

export function figuresOf(rows: readonly ClosedRow[], s: Settings): Figures {
  const f: Figures = {
    'idle window s': s.idleS,
    closed: 'run window closed an hour ago (opens in ~22 h), 2 learners queued per organization',
    spent: `${SPENT_ENV.LIMIT_PER_TOKEN}, burst ${SPENT_ENV.LIMIT_BURST}: one sent, the second waits 30 min`,
  };
  for (const r of rows) {
    const k = `${r.variant}, ${r.orgs} orgs`;
    if (r.connections !== undefined) f[`${k}: Redis connections`] = r.connections;
    if (r.connectionNames)
      f[`${k}: connections by name`] = Object.entries(r.connectionNames)
        .map(([n, c]) => `${n} ${c}`)
        .join(', ');
    if (r.idleCmdsPerS !== undefined) f[`${k}: idle Redis commands/s`] = r.idleCmdsPerS;
    const commands = commandsText(r.idleCommands);
    if (commands) f[`${k}: idle commands`] = commands;
    if (r.idleCpuPct !== undefined) f[`${k}: idle CPU % of one core`] = r.idleCpuPct;
    if (r.rssMb !== undefined) f[`${k}: RSS MB`] = r.rssMb;
    if (r.calls !== undefined) f[`${k}: transfer calls sent`] = r.calls;
    const wait = waitText(r.waitH);
    if (wait) f[`${k}: lanes due again in`] = wait;
    if (r.settleS !== undefined) f[`${k}: settle s`] = r.settleS;
    if (r.wallS !== undefined) f[`${k}: row wall s`] = r.wallS;
    if (r.failure) f[`${k}: failure`] = r.failure;
  }
  return f;
}

export async function measureRows(s: Settings = settingsFromEnv()): Promise<ClosedRow[]> {
  const rows: ClosedRow[] = [];
  for (const variant of s.variants)
    for (const n of s.sizes) {
      process.stderr.write(`orgs-closed: ${variant}, ${n} organizations ...\n`);
      rows.push(await measureRow(variant, n, s));
    }
  return rows;
}

export async function runOrgsClosedBench(): Promise<Figures> {
  const s = settingsFromEnv();
  return figuresOf(await measureRows(s), s);
}

if (isMain(import.meta.url)) {
  const s = settingsFromEnv();
  const rows = await measureRows(s);
  console.log(
    `work waiting, nothing allowed: one \`work\` process, one token and 2 learners queued per organization,\n` +
      `idle window ${s.idleS} s; commands are counts (the bench's own left out), CPU and RSS indicative on a shared machine.`,
  );
  console.log(markdownRows(rows));
}
