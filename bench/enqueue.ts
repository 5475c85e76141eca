// Enqueue benchmark: BENCH_ROWS (default 1,000,000) ids from a CSV through the real producer, against
// raw addBulk of the same ids in the same run; the producer's peak RSS against raw addBulk's own; Redis
// bytes per queued job and per outcome record (queued, and final with history). The two sides run
// BENCH_ENQUEUE_RUNS times (default 5), alternated, each in a process of its own; the figures are the
// medians (a shared 2-core machine makes any single run noisy), and each run's pair is listed too.
import { execFileSync } from 'node:child_process';
import { createWriteStream, mkdtempSync } from 'node:fs';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { createKeys } from '../src/core/keys.ts';
import { OutcomeStore } from '../src/outcomes/store.ts';
import { isMain, mb, median, printFigures, round, type Figures } from './common.ts';
import { deleteKeysUnder as dropPrefix } from '../src/redis/client.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

async function writeCsv(rows: number): Promise<string> {
  const file = join(mkdtempSync(join(tmpdir(), 'lt-bench-')), 'ids.csv');
  const out = createWriteStream(file);
  out.write('learnerId\n');
  for (let id = 1; id <= rows; id++) {
    if (!out.write(`${id}\n`)) await once(out, 'drain');
  }
  await new Promise<void>((resolve) => out.end(() => resolve()));
  return file;
}

function child(mode: string, prefix: string, rows: number, csv: string): { ms: number; maxRssKb: number } {
  const out = execFileSync(process.execPath, ['bin/run-ts.js', 'bench/enqueue-child.ts'], {
    env: {
      ...process.env,
      BENCH_MODE: mode,
      QUEUE_PREFIX: prefix,
      BENCH_ROWS: String(rows),
      BENCH_CSV: csv,
      REDIS_URL,
    },
    encoding: 'utf8',
    maxBuffer: 1 << 20,
  });
  return JSON.parse(out.trim().split('\n').pop() ?? '{}') as { ms: number; maxRssKb: number };
}

async function usedMemory(redis: Redis): Promise<number> {
  const info = await redis.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)?.[1] ?? 0);
}

/** Bytes per final outcome record with a full history, from MEMORY USAGE of a sample hash. */
async function finalRecordBytes(redis: Redis, prefix: string): Promise<number> {
  const keys = createKeys(prefix);
  const store = new OutcomeStore(redis, keys);
  const n = 2000;
  await store.markQueued(
    Array.from({ length: n }, (_, i) => ({
      org: 'acme',
      learnerId: i + 1,
      runId: 'r',
      source: 'ids.csv:1',
      force: false,
    })),
  );
  for (let i = 1; i <= n; i++) {
    await store.recordAttempt('acme', i, 'r', {
      bucket: 'retrying',
      code: 'server-error',
      status: 500,
      error: 'Transfer failed',
      message: 'An error occurred during the transfer',
      durationMs: 120,
      tokenId: 'a1b2c3d4e5f6',
      countsAsAttempt: true,
    });
    await store.recordAttempt('acme', i, 'r', {
      bucket: 'transferred',
      code: 'transferred',
      status: 200,
      durationMs: 95,
      tokenId: 'a1b2c3d4e5f6',
      transferId: `trf_${randomBytes(8).toString('hex')}`,
      auditId: `1763776952123-${i}`,
      countsAsAttempt: true,
    });
  }
  const bytes = Number(await redis.call('MEMORY', 'USAGE', keys.outcomes('acme'), 'SAMPLES', '0'));
  return bytes / n;
}

export async function runEnqueueBench(
  rows = Number(process.env.BENCH_ROWS ?? 1_000_000),
  runs = Number(process.env.BENCH_ENQUEUE_RUNS ?? 5),
): Promise<Figures> {
  const redis = new Redis(REDIS_URL);
  const tag = randomBytes(3).toString('hex');
  const rawPrefix = `lt-bench-raw-${tag}`;
  const prodPrefix = `lt-bench-prod-${tag}`;
  const recPrefix = `lt-bench-rec-${tag}`;
  try {
    const csv = await writeCsv(rows);
    const pairs: { raw: { ms: number; maxRssKb: number }; prod: { ms: number; maxRssKb: number } }[] = [];
    let rawJobBytes = 0;
    let learnerBytes = 0;
    let queuedRecordBytes = 0;
    for (let i = 0; i < runs; i++) {
      process.stderr.write(`  enqueue run ${i + 1}/${runs} ...\n`);
      const m0 = await usedMemory(redis);
      const raw = child('raw', rawPrefix, rows, csv);
      const m1 = await usedMemory(redis);
      await dropPrefix(redis, rawPrefix);
      const m2 = await usedMemory(redis);
      const prod = child('producer', prodPrefix, rows, csv);
      const m3 = await usedMemory(redis);
      if (i === 0) {
        rawJobBytes = (m1 - m0) / rows;
        learnerBytes = (m3 - m2) / rows;
        const keys = createKeys(prodPrefix);
        queuedRecordBytes =
          Number(await redis.call('MEMORY', 'USAGE', keys.outcomes('acme'), 'SAMPLES', '0')) / rows;
      }
      await dropPrefix(redis, prodPrefix);
      pairs.push({ raw, prod });
    }
    const finalBytes = await finalRecordBytes(redis, recPrefix);
    const ratios = pairs.map((p) => p.raw.ms / p.prod.ms);
    const rssMb = (kb: number) => mb(kb * 1024);
    return {
      rows,
      'runs (medians below)': runs,
      'raw addBulk rows/s (baseline)': Math.round(median(pairs.map((p) => (rows / p.raw.ms) * 1000))),
      'producer rows/s': Math.round(median(pairs.map((p) => (rows / p.prod.ms) * 1000))),
      'producer / raw addBulk': round(median(ratios), 3),
      'producer / raw addBulk, each run': ratios.map((r) => round(r, 3)).join(', '),
      'producer peak RSS MB': rssMb(median(pairs.map((p) => p.prod.maxRssKb))),
      'raw addBulk peak RSS MB': rssMb(median(pairs.map((p) => p.raw.maxRssKb))),
      'peak RSS MB producer / raw, each run': pairs
        .map((p) => `${rssMb(p.prod.maxRssKb)}/${rssMb(p.raw.maxRssKb)}`)
        .join(', '),
      'Redis bytes per queued job (raw addBulk)': Math.round(rawJobBytes),
      'Redis bytes per queued learner (job + outcome record)': Math.round(learnerBytes),
      'Redis bytes per outcome record, queued': Math.round(queuedRecordBytes),
      'Redis bytes per outcome record, final with history': Math.round(finalBytes),
    };
  } finally {
    for (const p of [rawPrefix, prodPrefix, recPrefix]) await dropPrefix(redis, p);
    await redis.quit();
  }
}

if (isMain(import.meta.url))
  printFigures('enqueue benchmark (same Redis, same run)', await runEnqueueBench());
