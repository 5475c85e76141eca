// Run retention (docs/redis-memory.md): a run older than RUN_RETENTION is folded into one summary and
// its keys deleted. `work` does it on a timer, by the one process that takes the interval's lock.
import type { Logger } from '../../core/log.ts';
import type { Keys } from '../../core/keys.ts';
import type { RedisClient } from '../../redis/client.ts';
import type { RunCounts, OutcomeStore } from '../../outcomes/store.ts';
import { Runs, type RunMeta } from '../../outcomes/runs.ts';

/** How often `work` looks for runs past retention (and how long one process holds the turn). */
export const RUN_RETENTION_INTERVAL_MS = 60 * 60 * 1000;
/** Runs compacted per pass at most: a first pass over years of runs is spread over a few intervals. */
const MAX_PER_PASS = 500;

export interface RetentionDeps {
  redis: RedisClient;
  keys: Keys;
  store: OutcomeStore;
  logger: Logger;
}

export type RetentionResult =
  { kind: 'locked' } | { kind: 'done'; compacted: string[]; unfinished: string[] };

/**
 * Compacts the runs created before `now - retentionMs`, if this process gets the fleet's turn (the lock
 * expires by itself after `intervalMs`: the next turn is the next interval's, whoever takes it).
 */
export async function compactOldRuns(
  deps: RetentionDeps,
  retentionMs: number,
  now = Date.now(),
  intervalMs = RUN_RETENTION_INTERVAL_MS,
): Promise<RetentionResult> {
  const { redis, keys } = deps;
  const turn = await redis.set(keys.runRetentionLock(), String(process.pid), 'PX', intervalMs, 'NX');
  if (turn !== 'OK') return { kind: 'locked' };
  const ids = await redis.zrangebyscore(keys.runs(), '-inf', now - retentionMs, 'LIMIT', 0, MAX_PER_PASS);
  const runs = new Runs(redis, keys);
  const compacted: string[] = [];
  const unfinished: string[] = [];
  for (const id of ids) {
    const meta = await runs.get(id);
    // A run with learners still waiting is in use, however old (a million learners at 1000 a day take
    // years): its counters stay live until its last learner is final.
    const counts = meta && !meta.compacted ? await countsOf(deps, meta) : undefined;
    if (counts && Object.values(counts).some((c) => (c.queued ?? 0) + (c.retrying ?? 0) > 0)) {
      unfinished.push(id);
      continue;
    }
    // Listed with neither metadata nor summary: nothing to keep but the listing, which goes.
    if (meta) await compactRun(deps, meta, counts, new Date(now));
    else await redis.zrem(keys.runs(), id);
    compacted.push(id);
  }
  if (compacted.length > 0) {
    deps.logger.info(
      { runs: compacted.length, first: compacted[0], last: compacted.at(-1) },
      `run retention: ${compacted.length} runs older than the retention compacted`,
    );
  }
  return { kind: 'done', compacted, unfinished };
}

/** The run's counters per organization (read once: they decide whether it waits, and are its summary). */
async function countsOf(deps: RetentionDeps, meta: RunMeta): Promise<Record<string, RunCounts>> {
  const byOrg: Record<string, RunCounts> = {};
  for (const org of meta.orgs) byOrg[org] = await deps.store.runCounts(org, meta.id);
  return byOrg;
}

/**
 * One run: the summary first, then its keys, then its place in the list, so a pass that dies midway is
 * finished by the next one (a run with a summary is not summarized again: its counters are gone).
 */
async function compactRun(
  deps: RetentionDeps,
  meta: RunMeta,
  byOrg: Record<string, RunCounts> | undefined,
  at: Date,
): Promise<void> {
  const { redis, keys } = deps;
  if (!meta.compacted && byOrg) {
    const summary: RunMeta = { ...meta, compacted: { at: at.toISOString(), byOrg } };
    await redis.hset(keys.runsCompacted(), meta.id, JSON.stringify(summary));
  }
  // Each organization's keys in their own slot: one DEL per organization (no cross-slot command).
  for (const org of meta.orgs)
    await redis.del(keys.runCounters(org, meta.id), keys.runFailures(org, meta.id));
  await redis.del(keys.run(meta.id));
  await redis.zrem(keys.runs(), meta.id);
  await redis.zrem(keys.runsActive(), meta.id);
}

/** What `report --run` says of a compacted run (undefined for a run kept whole). */
export function compactedRunNote(meta: RunMeta | undefined): string | undefined {
  if (!meta?.compacted) return undefined;
  return (
    `run ${meta.id} was compacted on ${meta.compacted.at} (older than RUN_RETENTION): its rows come from ` +
    'the learners’ records that still name it; its counters are kept as a summary, its failure index is gone'
  );
}
