// Redis bytes per finished learner: REDIS_BYTES_LEARNERS (default 100,000) learners transferred through
// the whole pipeline in this process (CSV -> producer -> workers -> the simulator), then every key under
// the bench's prefix weighed with MEMORY USAGE (exact: SAMPLES 0) and grouped by what it holds. Once with
// the audit stream as it grows with the archive off, once after the archive (AUDIT_ARCHIVE_DIR) ran
// (docs/redis-memory.md).
// REDIS_BYTES_PREVIOUS_ORG (default 1): 1 enqueues the cohort as a read of the learner list does (crawl,
// plan --check --apply, reconcile: each record keeps the learner's previous organization, `po`, for
// `report --reverse`); 0 as `enqueue --csv` does (no previous organization): the two give its cost.
// `node bin/run-ts.js bench/redis-bytes.ts`. Uses the shared Redis under a random prefix of its own.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createContext, type AppContext } from '../src/app/context.ts';
import { loadConfig } from '../src/core/config.ts';
import { createLogger } from '../src/core/log.ts';
import { newRunId } from '../src/outcomes/runs.ts';
import { enqueueCsv } from '../src/queue/enqueue-csv.ts';
import { createSimulator } from '../src/simulator/index.ts';
import { startWorkers } from '../src/worker/run-workers.ts';
import { AuditArchiver } from '../src/ops/audit/archive.ts';
import type { Keys } from '../src/core/keys.ts';
import { deleteKeysUnder, scanKeys, type RedisClient } from '../src/redis/client.ts';
import { isMain, printFigures, round, type Figures } from './common.ts';

function envInt(name: string, fallback: number): number {
  const n = Number(process.env[name] ?? fallback);
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`${name}: expected a whole number >= 1`);
  return n;
}

/** What a key holds, from its name (src/core/keys.ts). */
export function keyKind(prefix: string, key: string): string {
  const rest = key.slice(prefix.length + 1);
  if (rest.startsWith('transfers-'))
    return `bullmq ${rest.replace(/^transfers-\{[^}]+\}:?/, '').replace(/:.*$/, '') || 'meta'}`;
  const m = /^\{[^}]+\}:(.*)$/.exec(rest);
  if (!m) return rest.replace(/:.*$/, '');
  const tail = m[1] ?? '';
  if (tail === 'out') return 'records (out)';
  if (tail.startsWith('out:idx:')) return 'bucket indexes';
  if (tail === 'audit') return 'audit stream';
  if (tail === 'audit:ids') return 'audit dedupe (audit:ids)';
  if (tail.startsWith('run:')) return tail.endsWith(':fail') ? 'run failure index' : 'run counters';
  if (tail.startsWith('hourly:')) return 'hourly';
  if (tail.startsWith('lim:')) return 'limiter';
  if (tail.startsWith('crawl:')) return 'crawl';
  return tail.replace(/:.*$/, '');
}

/** Bytes per kind of key under the prefix (every master of a cluster). */
export async function weigh(redis: RedisClient, prefix: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for await (const batch of scanKeys(redis, `${prefix}:*`)) {
    for (const key of batch) {
      const bytes = Number((await redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) ?? 0);
      const kind = keyKind(prefix, key);
      out.set(kind, (out.get(kind) ?? 0) + bytes);
    }
  }
  return out;
}

/**
 * The archive a fleet with AUDIT_ARCHIVE_DIR runs (src/ops/audit/archive.ts): every entry exported to the
 * day files, fsynced and read back, then trimmed from the stream. Returns how many it archived.
 */
export async function archiveAudit(
  redis: RedisClient,
  keys: Keys,
  dir: string,
  orgs: readonly string[],
): Promise<number> {
  const pass = await new AuditArchiver(redis, keys, { dir }).runOnce(orgs);
  if (!pass.ran || pass.failed.length > 0)
    throw new Error(`the archive pass failed: ${JSON.stringify(pass)}`);
  return pass.archived;
}

function perLearner(kinds: Map<string, number>, learners: number, skip?: string): number {
  let sum = 0;
  for (const [k, v] of kinds) if (k !== skip) sum += v;
  return round(sum / learners, 0);
}

/**
 * The cohort into the queue: as `enqueue --csv` (no previous organization), or as a read of the learner
 * list (crawl, plan --check --apply) enqueues it: each learner with the organization the list shows.
 */
async function enqueueCohort(
  ctx: AppContext,
  ids: readonly number[],
  dir: string,
  withPrevious: boolean,
): Promise<void> {
  const runId = newRunId();
  await ctx.runs.create({ id: runId, kind: 'csv', source: 'bytes.csv', orgs: ['acme'] });
  if (withPrevious) {
    for (let i = 0; i < ids.length; i += 1000) {
      const items = ids.slice(i, i + 1000).map((learnerId, j) => ({
        org: 'acme',
        learnerId,
        source: `crawl:page ${Math.floor((i + j) / 100) + 1}`,
        // The simulator's seed: learner i is in organization ((i - 1) % 3) + 1.
        previousOrgId: ((learnerId - 1) % 3) + 1,
      }));
      await ctx.producer.add(items, runId);
    }
    return;
  }
  const file = join(dir, 'bytes.csv');
  writeFileSync(file, `learner_id\n${ids.join('\n')}\n`);
  await enqueueCsv(
    { producer: ctx.producer, runs: ctx.runs },
    { file, defaultOrg: 'acme', knownOrgs: ['acme'], runId, rejectsFile: join(dir, 'rejects.csv') },
  );
}

export async function runRedisBytesBench(): Promise<Figures> {
  const learners = envInt('REDIS_BYTES_LEARNERS', 100_000);
  const withPrevious = (process.env.REDIS_BYTES_PREVIOUS_ORG ?? '1') !== '0';
  const prefix = `lt-bench-bytes-${Date.now().toString(36)}`;
  const tokens = [1, 2, 3, 4].map((i) => ({ token: `bytes-acme-token-${i}`, org: 'acme' }));
  // Learner i belongs to organization (i-1) % 3 in the simulator's seed: acme owns every third.
  const ids: number[] = [];
  for (let id = 2; ids.length < learners; id++) if ((id - 1) % 3 !== 0) ids.push(id);
  const dir = mkdtempSync(join(tmpdir(), 'lt-bytes-'));
  const env: Record<string, string> = {
    REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    QUEUE_PREFIX: prefix,
    LEARNER_API_TOKENS: tokens.map((t) => `acme:${t.token}`).join(','),
    LIMIT_PER_TOKEN: '5000/1s',
    LIMIT_PER_ORG: '20000/1s',
    REQUEST_TIMEOUT: '2s',
    BACKOFF: '100ms',
    LOG_LEVEL: 'warn',
    SPOOL_DIR: join(dir, 'spool'),
  };
  const config = loadConfig(env, { requireTokens: true });
  const sim = createSimulator({
    learners: (ids.at(-1) ?? 0) + 1,
    tokens,
    limits: { perToken: config.limitPerToken, perOrg: config.limitPerOrg, window: 'rolling' },
  });
  await sim.listen();
  env.LEARNER_API_BASE_URL = sim.url;
  const ctx = await createContext(loadConfig(env, { requireTokens: true }), {
    logger: createLogger({ level: 'warn' }),
  });
  try {
    await enqueueCohort(ctx, ids, dir, withPrevious);
    const t0 = Date.now();
    await startWorkers(ctx, { orgs: ['acme'], concurrency: 64, untilIdle: true, idleCheckMs: 200 }).done;
    const wallMs = Date.now() - t0;
    const counts = await ctx.store.orgCounts('acme');
    const finished = Object.entries(counts)
      .filter(([k]) => k !== 'queued' && k !== 'retrying')
      .reduce((s, [, v]) => s + v, 0);
    const withStream = await weigh(ctx.redis, prefix);
    const sample = (await ctx.redis.hrandfield(ctx.keys.outcomes('acme'), 1, 'WITHVALUES')) as string[];
    const archived = await archiveAudit(ctx.redis, ctx.keys, join(dir, 'archive'), ['acme']);
    const trimmed = await weigh(ctx.redis, prefix);
    const figures: Figures = {
      learners,
      'previous organization kept (REDIS_BYTES_PREVIOUS_ORG)': withPrevious ? 'yes' : 'no',
      'finished learners': finished,
      'work wall time s': round(wallMs / 1000, 1),
      'audit entries archived': archived,
      'bytes per finished learner, audit stream counted': perLearner(withStream, finished),
      'bytes per finished learner, AUDIT_ARCHIVE_DIR on (goal < 400)': perLearner(trimmed, finished),
    };
    figures['a record, as stored'] = sample[1] ?? '';
    const kinds = [...withStream.entries()].sort((a, b) => b[1] - a[1]);
    for (const [kind, bytes] of kinds) figures[`  ${kind} (bytes/learner)`] = round(bytes / finished, 1);
    return figures;
  } finally {
    await deleteKeysUnder(ctx.redis, prefix);
    await ctx.close();
    await sim.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (isMain(import.meta.url)) {
  printFigures('redis-bytes: Redis bytes per finished learner', await runRedisBytesBench());
}
