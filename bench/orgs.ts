// Organizations on one fleet (issue 29): for 1, 100, 1,000 and 10,000 organizations of one token each,
// ONE `work` process against a redis-server of the bench's own, and per size:
//   connections   its Redis connections once settled (CLIENT LIST, the bench's own left out);
//   idle cmds/s   commands Redis processed while there is nothing to do (INFO stats, over the idle
//                 window, the bench's own readings left out);
//   idle CPU %    its utime + stime over the same window, as a share of one core;
//   RSS MB        its VmRSS at the end of that window;
//   move          seconds from enqueueing 2 learners per organization to a final outcome for each,
//                 against the ideal: the same number of learners through ONE organization, in a fresh
//                 fleet of the same kind, measured in the same run. Limits are lifted and the simulator
//                 answers at once, so both are the machine's own work: the ratio is what the number of
//                 organizations costs.
// Connections and commands are counts, the main figures; CPU, RSS and times are indicative on a shared
// machine. A size that fails (Redis refuses connections, the process dies, the tokens cannot be passed)
// is reported as such and the next one runs.
// BENCH_ORGS=1,100,1000 picks sizes; BENCH_ORGS_IDLE_S (60, the issue's average) the idle window, after
// BENCH_ORGS_WARMUP_S (35: past the first token-file reload, which parses the file once); BENCH_ORGS_BASELINE_CONCURRENCY
// (32) the concurrency of the one-organization baseline; BENCH_ORGS_MOVE_TIMEOUT_S (600) the longest move.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { isMain, round, type Figures } from './common.ts';
import { closeFleet, moveAll, openFleet, settle, type Fleet } from './orgs-fleet.ts';
import { commandsProcessed, procSample, rejectedConnections } from './orgs-probes.ts';
import { orgKeys, tokenEnv, tokenFileSupported, tokensFor } from './orgs-tokens.ts';

const DEFAULT_SIZES = [1, 100, 1000, 10_000];

export interface Settings {
  sizes: number[];
  idleS: number;
  /** Seconds after settling before the idle window: the start-up's last work (a first reload, GC) is not idle. */
  warmupS: number;
  baselineConcurrency: number;
  moveTimeoutS: number;
}

export interface OrgsRow {
  orgs: number;
  tokensVia?: string;
  connections?: number;
  /** Connections by client name (up to its first ':'). */
  connectionNames?: Record<string, number>;
  idleCmdsPerS?: number;
  idleCpuPct?: number;
  rssMb?: number;
  moveS?: number;
  idealS?: number;
  failure?: string;
}

function envNumber(name: string, fallback: number, min: number): number {
  const n = Number(process.env[name] ?? fallback);
  if (!Number.isFinite(n) || n < min) throw new Error(`${name}: expected a number >= ${min}`);
  return n;
}

export function settingsFromEnv(): Settings {
  const sizes = process.env.BENCH_ORGS?.split(',').map((s) => Number(s.trim())) ?? DEFAULT_SIZES;
  if (sizes.some((n) => !Number.isSafeInteger(n) || n < 1 || n > 99_999))
    throw new Error('BENCH_ORGS: expected organization counts from 1 to 99999, like 1,100,1000');
  return {
    sizes,
    idleS: envNumber('BENCH_ORGS_IDLE_S', 60, 1),
    warmupS: envNumber('BENCH_ORGS_WARMUP_S', 35, 0),
    baselineConcurrency: Math.floor(envNumber('BENCH_ORGS_BASELINE_CONCURRENCY', 32, 1)),
    moveTimeoutS: envNumber('BENCH_ORGS_MOVE_TIMEOUT_S', 600, 1),
  };
}

/** Starting every worker of 10,000 organizations takes a while on the code before issue 29. */
const settleTimeoutMs = (orgs: number) => 60_000 + 30 * orgs;

async function idleFigures(fleet: Fleet, idleS: number, row: OrgsRow): Promise<void> {
  const c0 = await commandsProcessed(fleet.monitor);
  const p0 = procSample(fleet.pid);
  const t0 = performance.now();
  await sleep(idleS * 1000);
  const p1 = procSample(fleet.pid);
  const c1 = await commandsProcessed(fleet.monitor);
  const s = (performance.now() - t0) / 1000;
  if (!p0 || !p1) throw new Error('work exited during the idle window');
  row.idleCmdsPerS = round((c1 - c0 - fleet.readingCost) / s, 1);
  row.idleCpuPct = round(((p1.cpuS - p0.cpuS) / s) * 100, 2);
  row.rssMb = round(p1.rssKb / 1024, 0);
}

/** The organization count's own figures; throws on the first that fails (the row keeps the rest). */
async function fleetFigures(fleet: Fleet, s: Settings, row: OrgsRow): Promise<void> {
  const clients = await settle(fleet, settleTimeoutMs(row.orgs));
  row.connections = clients.count;
  row.connectionNames = clients.byName;
  const refused = await rejectedConnections(fleet.monitor);
  if (refused > 0) throw new Error(`Redis refused ${refused} connections (maxclients 10000)`);
  await sleep(s.warmupS * 1000);
  await idleFigures(fleet, s.idleS, row);
  row.moveS = round((await moveAll(fleet, s.moveTimeoutS * 1000)).ms / 1000, 2);
}

/** The same number of learners moved through one organization: the ideal of the move. */
async function baselineS(learners: number, s: Settings, useFile: boolean, dir: string): Promise<number> {
  const tokens = tokensFor(orgKeys(1));
  const te = tokenEnv(tokens, dir, useFile);
  if (!te.ok) throw new Error(te.why);
  const concurrency = Math.min(learners, s.baselineConcurrency);
  const fleet = await openFleet({ tokens, tokenEnv: te.env, learnersPerOrg: learners, concurrency });
  try {
    await settle(fleet, settleTimeoutMs(1));
    return round((await moveAll(fleet, s.moveTimeoutS * 1000)).ms / 1000, 2);
  } finally {
    await closeFleet(fleet);
  }
}

export async function measureRow(orgs: number, s: Settings): Promise<OrgsRow> {
  const row: OrgsRow = { orgs };
  const useFile = tokenFileSupported();
  const dir = mkdtempSync(join(tmpdir(), 'lt-bench-orgs-tokens-'));
  try {
    const tokens = tokensFor(orgKeys(orgs));
    const te = tokenEnv(tokens, dir, useFile);
    if (!te.ok) return { ...row, failure: te.why };
    row.tokensVia = te.via;
    const fleet = await openFleet({ tokens, tokenEnv: te.env, learnersPerOrg: 2, concurrency: 2 });
    try {
      await fleetFigures(fleet, s, row);
    } catch (err) {
      return { ...row, failure: (err as Error).message };
    } finally {
      await closeFleet(fleet);
    }
    try {
      row.idealS = await baselineS(2 * orgs, s, useFile, dir);
    } catch (err) {
      row.failure = `ideal not measured: ${(err as Error).message}`;
    }
    return row;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const cell = (v: number | string | undefined) => (v === undefined ? '-' : String(v));

export function ratio(row: OrgsRow): string | undefined {
  if (row.moveS === undefined || row.idealS === undefined || row.idealS <= 0) return undefined;
  return `${(row.moveS / row.idealS).toFixed(2)}x (${row.moveS} s vs ${row.idealS} s)`;
}

export function markdownRows(rows: readonly OrgsRow[]): string {
  const lines = [
    '| organizations | Redis connections of one `work` | Redis commands/s, nothing to do | CPU, nothing to do | RSS | move 2 learners/org vs ideal | note |',
    '|---|---|---|---|---|---|---|',
  ];
  for (const r of rows) {
    lines.push(
      `| ${r.orgs} | ${cell(r.connections)} | ${cell(r.idleCmdsPerS)} | ${r.idleCpuPct === undefined ? '-' : `${r.idleCpuPct}%`} | ${r.rssMb === undefined ? '-' : `${r.rssMb} MB`} | ${cell(ratio(r))} | ${r.failure ?? ''} |`,
    );
  }
  return lines.join('\n');
}

export function figuresOf(rows: readonly OrgsRow[], s: Settings): Figures {
  const f: Figures = {
    'idle window s': s.idleS,
    ideal: `the same learners through 1 organization, concurrency up to ${s.baselineConcurrency}`,
  };
  for (const r of rows) {
    const k = `${r.orgs} orgs`;
    if (r.tokensVia) f[`${k}: tokens via`] = r.tokensVia;
    if (r.connections !== undefined) f[`${k}: Redis connections`] = r.connections;
    if (r.connectionNames)
      f[`${k}: connections by name`] = Object.entries(r.connectionNames)
        .map(([n, c]) => `${n} ${c}`)
        .join(', ');
    if (r.idleCmdsPerS !== undefined) f[`${k}: idle Redis commands/s`] = r.idleCmdsPerS;
    if (r.idleCpuPct !== undefined) f[`${k}: idle CPU % of one core`] = r.idleCpuPct;
    if (r.rssMb !== undefined) f[`${k}: RSS MB`] = r.rssMb;
    const m = ratio(r);
    if (m) f[`${k}: move 2 learners/org vs ideal`] = m;
    if (r.failure) f[`${k}: failure`] = r.failure;
  }
  return f;
}

export async function measureRows(s: Settings = settingsFromEnv()): Promise<OrgsRow[]> {
  const rows: OrgsRow[] = [];
  for (const n of s.sizes) {
    process.stderr.write(`orgs: ${n} organizations ...\n`);
    rows.push(await measureRow(n, s));
  }
  return rows;
}

export async function runOrgsBench(): Promise<Figures> {
  const s = settingsFromEnv();
  return figuresOf(await measureRows(s), s);
}

if (isMain(import.meta.url)) {
  const s = settingsFromEnv();
  const rows = await measureRows(s);
  console.log(
    `organizations on one fleet: one \`work\` process, one token per organization, idle window ${s.idleS} s;\n` +
      `ideal = the same learners through 1 organization (concurrency up to ${s.baselineConcurrency}), same run;\n` +
      'connections and commands are counts; CPU, RSS and times are indicative on a shared machine.',
  );
  console.log(markdownRows(rows));
}
