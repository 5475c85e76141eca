// How soon the binary answers at a terminal (not a test): `node bin/run-ts.js bench/cli-start.ts`.
// Each figure runs bin/learner-transfer.js as a user does, in a process of its own, and is a median of
// BENCH_CLI_RUNS runs, taken in turns with its baseline in the same run:
//   --help, and status on an empty prefix: against `node -e 0` (goals: at most 3x and 5x)
//   work's first transfer call after its start: against a plain BullMQ worker (bullmq + undici, a job
//   a PATCH) on the same workload, from its spawn to its first call the simulator sees (goal: 1x)
// BENCH_CLI_BEFORE=DIR measures another checkout's binary too (the figures before a change: its bin/,
// its node_modules), in the same turns, so that a busy machine weighs on both alike; the simulator,
// Redis and the enqueue are this checkout's. A checkout builds its sources on the first start after a
// change (bin/learner-transfer.js): one run of each binary warms it, uncounted.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { createContext } from '../src/app/context.ts';
import { loadConfig } from '../src/core/config.ts';
import { createLogger } from '../src/core/log.ts';
import { enqueueCsv } from '../src/queue/enqueue-csv.ts';
import { deleteKeysUnder } from '../src/redis/client.ts';
import { createSimulator, type Simulator } from '../src/simulator/index.ts';
import { isMain, median, printFigures, round, type Figures } from './common.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const ROOT = join(fileURLToPath(new URL('.', import.meta.url)), '..');
/** The binaries measured: another checkout's first when BENCH_CLI_BEFORE names one, then this one's. */
const CHECKOUTS = [
  ...(process.env.BENCH_CLI_BEFORE ? [{ label: 'before: ', root: process.env.BENCH_CLI_BEFORE }] : []),
  { label: '', root: ROOT },
].map((c) => ({ ...c, bin: join(c.root, 'bin', 'learner-transfer.js') }));
const RUNS = Number(process.env.BENCH_CLI_RUNS ?? 7);
/** Learners each worker moves: enough that the first call is not the last. */
const LEARNERS = 20;
const TOKEN = 'sim-acme-1';

interface Exit {
  ms: number;
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Where the binary runs: whatever it writes (out/...) stays out of the checkout measured. */
const WORK_DIR = mkdtempSync(join(tmpdir(), 'lt-bench-cli-cwd-'));

/** Runs node with `args` in `cwd` and resolves when it has exited. */
function runNode(args: string[], env: Record<string, string> = {}, cwd = WORK_DIR): Promise<Exit> {
  const started = performance.now();
  const child = spawn(process.execPath, args, {
    cwd,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`node ${args.join(' ')} did not exit in 120 s; stderr: ${stderr.slice(-1000)}`));
    }, 120_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ ms: performance.now() - started, code, stdout, stderr });
    });
  });
}

async function expectExit(args: string[], env: Record<string, string> = {}, cwd = WORK_DIR): Promise<number> {
  const r = await runNode(args, env, cwd);
  if (r.code !== 0) throw new Error(`node ${args.join(' ')} exited ${r.code}: ${r.stderr.slice(-1000)}`);
  return r.ms;
}

/** --help and status of each checkout against node -e 0, in turns. */
async function startFigures(): Promise<Figures> {
  const prefix = `lt-bench-cli-${randomBytes(3).toString('hex')}`;
  const statusEnv = { REDIS_URL, QUEUE_PREFIX: prefix, LEARNER_API_TOKENS: 'acme:bench-cli-token-1' };
  const baseline: number[] = [];
  const help = CHECKOUTS.map((): number[] => []);
  const status = CHECKOUTS.map((): number[] => []);
  for (const c of CHECKOUTS) await expectExit([c.bin, '--help']); // a checkout builds its sources here
  try {
    for (let i = 0; i < RUNS; i++) {
      baseline.push(await expectExit(['-e', '0']));
      for (const [k, c] of CHECKOUTS.entries()) {
        help[k]?.push(await expectExit([c.bin, '--help']));
        status[k]?.push(await expectExit([c.bin, 'status'], statusEnv));
      }
    }
  } finally {
    const redis = new Redis(REDIS_URL);
    await deleteKeysUnder(redis, prefix);
    await redis.quit();
  }
  const base = median(baseline);
  const figures: Figures = { 'node -e 0 ms (baseline)': Math.round(base) };
  for (const [k, { label }] of CHECKOUTS.entries()) {
    const h = median(help[k] ?? []);
    const st = median(status[k] ?? []);
    figures[`${label}--help ms`] = Math.round(h);
    figures[`${label}--help / node -e 0 (goal <= 3)`] = round(h / base, 1);
    figures[`${label}status, empty prefix ms`] = Math.round(st);
    figures[`${label}status / node -e 0 (goal <= 5)`] = round(st / base, 1);
  }
  return figures;
}

/** A plain BullMQ worker: each job one PATCH with undici; exits when the queue is drained. */
const PLAIN_WORKER = `
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { request } from 'undici';
const { REDIS_URL, QUEUE, PREFIX, SIM_URL, TOKEN } = process.env;
const worker = new Worker(QUEUE, async (job) => {
  const res = await request(SIM_URL + '/1/learner/' + job.data.learnerId + '/transfer', {
    method: 'PATCH',
    headers: { authorization: 'Bearer ' + TOKEN, 'content-type': 'application/json', accept: 'application/json' },
    body: '{}',
  });
  await res.body.text();
  return res.statusCode;
}, { connection: new Redis(REDIS_URL, { maxRetriesPerRequest: null }), prefix: PREFIX, concurrency: 5 });
worker.on('drained', () => worker.close().then(() => process.exit(0)));
`;

/** The time from `start` (Date.now()) to the first transfer call the simulator saw after it. */
function firstCallMs(sim: Simulator, start: number): number {
  const call = sim.record.find((r) => r.method === 'PATCH' && r.receivedAt >= start);
  if (!call) throw new Error('no transfer call reached the simulator');
  return call.receivedAt - start;
}

/** Enqueues LEARNERS learners of other organizations into acme under `prefix`, through our producer. */
async function enqueueOurs(prefix: string, ids: number[]): Promise<void> {
  const config = loadConfig({ REDIS_URL, QUEUE_PREFIX: prefix, LEARNER_API_TOKENS: `acme:${TOKEN}` });
  const ctx = await createContext(config, { logger: createLogger({ level: 'error' }) });
  try {
    const file = join(mkdtempSync(join(tmpdir(), 'lt-bench-cli-')), 'ids.csv');
    writeFileSync(file, `learnerId\n${ids.join('\n')}\n`);
    await ctx.runs.create({ id: 'bench', kind: 'csv', source: file, orgs: ['acme'] });
    await enqueueCsv(
      { producer: ctx.producer, runs: ctx.runs },
      { file, defaultOrg: 'acme', knownOrgs: config.orgs, runId: 'bench', rejectsFile: `${file}.rejects` },
    );
  } finally {
    await ctx.close();
  }
}

/** One `work --until-idle` of `bin` from its spawn to its first call. */
async function ourFirstCall(sim: Simulator, bin: string, ids: number[]): Promise<number> {
  const prefix = `lt-bench-cli-work-${randomBytes(3).toString('hex')}`;
  try {
    await enqueueOurs(prefix, ids);
    const start = Date.now();
    const r = await runNode([bin, 'work', '--until-idle'], {
      REDIS_URL,
      QUEUE_PREFIX: prefix,
      LEARNER_API_BASE_URL: sim.url,
      LEARNER_API_TOKENS: `acme:${TOKEN}`,
      LIMIT_PER_TOKEN: '1000/1s',
      LIMIT_PER_ORG: '1000/1s',
      SPOOL_DIR: join(mkdtempSync(join(tmpdir(), 'lt-bench-cli-spool-')), 'spool'),
      LOG_LEVEL: 'error',
    });
    if (r.code !== 0) throw new Error(`work exited ${r.code}: ${r.stderr.slice(-1000)}`);
    return firstCallMs(sim, start);
  } finally {
    const redis = new Redis(REDIS_URL);
    await deleteKeysUnder(redis, prefix);
    await redis.quit();
  }
}

/** The plain worker from its spawn to its first call, on the same learners. */
async function plainFirstCall(sim: Simulator, ids: number[]): Promise<number> {
  const prefix = `lt-bench-cli-plain-${randomBytes(3).toString('hex')}`;
  const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const queue = new Queue('plain', { connection, prefix });
  try {
    await queue.addBulk(ids.map((learnerId) => ({ name: 'transfer', data: { learnerId } })));
    const start = Date.now();
    // In the measured checkout, whose node_modules it imports.
    await expectExit(
      ['--input-type=module', '-e', PLAIN_WORKER],
      { REDIS_URL, QUEUE: 'plain', PREFIX: prefix, SIM_URL: sim.url, TOKEN },
      ROOT,
    );
    return firstCallMs(sim, start);
  } finally {
    await queue.close();
    await deleteKeysUnder(connection, prefix);
    await connection.quit();
  }
}

/** work's first call of each checkout against the plain worker's, in turns, each on learners of its own. */
async function workFigures(runs: number): Promise<Figures> {
  // Learner i is in organizations[(i - 1) % 3]: these are not in acme yet, so each is a real transfer.
  const batchCount = (CHECKOUTS.length + 1) * (runs + 1);
  const movable = Array.from({ length: 3 * LEARNERS * batchCount }, (_, i) => i + 1).filter(
    (id) => (id - 1) % 3 !== 0,
  );
  const batches = Array.from({ length: batchCount }, (_, i) =>
    movable.slice(i * LEARNERS, (i + 1) * LEARNERS),
  );
  const next = () => batches.pop() as number[];
  const sim = createSimulator({ learners: movable.length * 2 + 3, repeatMode: 'error' });
  await sim.listen();
  const ours = CHECKOUTS.map((): number[] => []);
  const plain: number[] = [];
  try {
    // The first of each warms the build and the disk cache, uncounted.
    for (const c of CHECKOUTS) await ourFirstCall(sim, c.bin, next());
    await plainFirstCall(sim, next());
    for (let i = 0; i < runs; i++) {
      plain.push(await plainFirstCall(sim, next()));
      for (const [k, c] of CHECKOUTS.entries()) ours[k]?.push(await ourFirstCall(sim, c.bin, next()));
    }
  } finally {
    await sim.close();
  }
  const base = median(plain);
  const figures: Figures = { 'plain BullMQ worker: first call ms (baseline)': Math.round(base) };
  for (const [k, { label }] of CHECKOUTS.entries()) {
    figures[`${label}work: first call ms`] = Math.round(median(ours[k] ?? []));
    figures[`${label}work / plain BullMQ (goal <= 1)`] = round(median(ours[k] ?? []) / base, 2);
  }
  return figures;
}

export async function runCliStartBench(): Promise<Figures> {
  return {
    runs: RUNS,
    ...(await startFigures()),
    ...(await workFigures(Math.max(3, Math.ceil(RUNS / 2)))),
  };
}

if (isMain(import.meta.url)) printFigures(`CLI start-up (medians of ${RUNS})`, await runCliStartBench());
