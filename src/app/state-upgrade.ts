// Redis state written by an earlier release keeps working: a migration in progress survives an upgrade.
// Each step runs once per prefix (the version is stored beside the state) and is idempotent, so two
// processes starting together at worst both run it.
//
// Version 1 (the first release): outcome records, queues, budget logs, audit entries with `result`.
// Version 2: + claims (one organization per learner). Records of version 1 are claimed for their
// organization, first come; a learner recorded in two organizations (the bug that claims fix) stays
// claimed by the one that transferred it, and the conflict is logged.
// Version 3: + the failure index of each run (`{org}:run:<runId>:fail`, the dashboard's run filter).
// Records of earlier versions in a failure bucket are added to their run's index.
// Version 4: the control queue is named `{control}` (a hash tag, for Redis Cluster): the schedules and
// waiting jobs of the old `control` queue are moved to it.
// Version 5: the compact record. A final record keeps what report, retry and the dashboard read; its
// history and audit ids are in the audit stream (an entry of kind 'record'), its audit dedupe keys gone
// (src/outcomes/includes/compact.lua). Final records written whole are compacted the same way.
import { scanKeys, type RedisClient } from '../redis/client.ts';
import { hasLegacyControlQueue } from '../queue/control-legacy.ts';
import type { Keys } from '../core/keys.ts';
import type { Logger } from '../core/log.ts';
import { Claims } from '../claims/claims.ts';
import {
  decodeRecord,
  FAILURE_BUCKETS,
  isFinalBucket,
  isSuccessBucket,
  type Bucket,
} from '../outcomes/record.ts';
import { OutcomeStore } from '../outcomes/store.ts';

export const STATE_VERSION = 5;

export interface UpgradeDeps {
  redis: RedisClient;
  keys: Keys;
  logger: Logger;
  /** Organizations this process knows (others are found by their records' keys). */
  orgs: readonly string[];
}

export async function upgradeState(deps: UpgradeDeps): Promise<void> {
  const { redis, keys, logger } = deps;
  const version = Number((await redis.get(keys.stateVersion())) ?? 0);
  if (version >= STATE_VERSION) return;
  try {
    // Schedules may exist before any run (`schedule add` first): moved whether or not a run exists. With
    // nothing in the old queue, this reads and writes nothing.
    // BullMQ is loaded only when there is something to move (queue/control-legacy.ts looks without it).
    if (version < 4 && (await hasLegacyControlQueue(redis, keys))) {
      const { moveLegacyControlQueue } = await import('../queue/control-upgrade.ts');
      await moveLegacyControlQueue(redis, keys, logger);
    }
    // A prefix nothing was ever enqueued under has nothing more to upgrade: write nothing (plan, status
    // and --dry-run stay read-only); the first start after the first run records the version.
    if ((await redis.exists(keys.runs())) === 0) return;
    if (version < 2) await claimRecorded(deps);
    if (version < 3) await indexRunFailures(deps);
    if (version < 5) await compactFinished(deps);
    await redis.set(keys.stateVersion(), String(STATE_VERSION));
  } catch (err) {
    // A Redis that refuses writes must not stop read-only commands (status, report): the worker claims
    // lazily before each call, and the next start runs the upgrade again (until then, a run filter on
    // the dashboard misses failures recorded before it).
    logger.warn(
      { err: (err as Error).message },
      'could not upgrade the Redis state to this release (it is retried at the next start)',
    );
  }
}

/** Organizations with outcome records under the prefix, from their keys (`prefix:{org}:out`). */
async function recordedOrgs(redis: RedisClient, keys: Keys): Promise<string[]> {
  const found = new Set<string>();
  // Every master of a cluster: each organization's keys sit in its own slot.
  for await (const batch of scanKeys(redis, keys.outcomesPattern())) {
    for (const k of batch) {
      const m = /:\{([^}]+)\}:out$/.exec(k);
      if (m?.[1]) found.add(m[1]);
    }
  }
  return [...found];
}

async function claimRecorded({ redis, keys, logger, orgs }: UpgradeDeps): Promise<void> {
  const claims = new Claims(redis, keys);
  const all = [...new Set([...orgs, ...(await recordedOrgs(redis, keys))])];
  // Organizations with the learner transferred claim first: a learner the old release moved twice stays
  // with the organization its record says it is in.
  const pass = async (successOnly: boolean) => {
    let conflicts = 0;
    const examples: string[] = [];
    for (const org of all) {
      let cursor = '0';
      do {
        const [next, flat] = await redis.hscan(keys.outcomes(org), cursor, 'COUNT', 1000);
        cursor = next;
        const items: { org: string; learnerId: number }[] = [];
        for (let i = 0; i + 1 < flat.length; i += 2) {
          const rec = decodeRecord(flat[i + 1]);
          if (!rec || isSuccessBucket(rec.b as Bucket) !== successOnly) continue;
          items.push({ org, learnerId: Number(flat[i]) });
        }
        const results = await claims.claim(items);
        results.forEach((r, i) => {
          if (r.kind !== 'elsewhere') return;
          conflicts++;
          if (examples.length < 5) examples.push(`${items[i]?.learnerId} (${org}, claimed by ${r.holder})`);
        });
      } while (cursor !== '0');
    }
    return { conflicts, examples };
  };
  const a = await pass(true);
  const b = await pass(false);
  const conflicts = a.conflicts + b.conflicts;
  if (conflicts > 0) {
    logger.warn(
      { conflicts, examples: [...a.examples, ...b.examples].slice(0, 5) },
      `${conflicts} learners have records in more than one organization (written before claims existed): ` +
        'each is claimed by one of them; moving one takes an explicit --move',
    );
  }
  logger.debug({ orgs: all.length }, 'Redis state upgraded: learners recorded earlier are claimed');
}

/**
 * Adds each failed learner to its run's failure index, scored by the time of its outcome (the record's
 * `t`, as the scripts score it). ZADD of the same member and score is a no-op, so running it again, or
 * beside a process of this release that writes the index itself, changes nothing. A learner that such a
 * process moves out of its failure between the HSCAN and the ZADD is added back, stale: readers keep only
 * records that still name the run and a failure bucket, as for a learner moved to another run.
 */
async function indexRunFailures({ redis, keys, logger, orgs }: UpgradeDeps): Promise<void> {
  const all = [...new Set([...orgs, ...(await recordedOrgs(redis, keys))])];
  let indexed = 0;
  for (const org of all) {
    let cursor = '0';
    do {
      const [next, flat] = await redis.hscan(keys.outcomes(org), cursor, 'COUNT', 1000);
      cursor = next;
      const byRun = new Map<string, (string | number)[]>();
      for (let i = 0; i + 1 < flat.length; i += 2) {
        const rec = decodeRecord(flat[i + 1]);
        if (!rec || !FAILURE_BUCKETS.includes(rec.b as Bucket)) continue;
        const pairs = byRun.get(rec.r);
        if (pairs) pairs.push(rec.t, flat[i] as string);
        else byRun.set(rec.r, [rec.t, flat[i] as string]);
      }
      if (byRun.size === 0) continue;
      // One round trip per batch; every key is in the organization's slot.
      const pipe = redis.pipeline();
      for (const [runId, pairs] of byRun) pipe.zadd(keys.runFailures(org, runId), ...pairs);
      for (const [err] of (await pipe.exec()) ?? []) if (err) throw err;
      for (const pairs of byRun.values()) indexed += pairs.length / 2;
    } while (cursor !== '0');
  }
  logger.debug({ orgs: all.length, indexed }, 'Redis state upgraded: failed learners are indexed per run');
}

/**
 * Compacts every final record written whole (compact-records.lua), a batch of ids per script call. The
 * script reads each record again, atomically: one a worker of this release compacted, or moved out of its
 * final bucket, since the HSCAN is left as it is.
 */
async function compactFinished({ redis, keys, logger, orgs }: UpgradeDeps): Promise<void> {
  const store = new OutcomeStore(redis, keys);
  const all = [...new Set([...orgs, ...(await recordedOrgs(redis, keys))])];
  let compacted = 0;
  for (const org of all) {
    let cursor = '0';
    do {
      const [next, flat] = await redis.hscan(keys.outcomes(org), cursor, 'COUNT', 500);
      cursor = next;
      const ids: number[] = [];
      for (let i = 0; i + 1 < flat.length; i += 2) {
        const rec = decodeRecord(flat[i + 1]);
        if (!rec || !isFinalBucket(rec.b as Bucket)) continue;
        if (rec.h !== undefined || rec.au !== undefined || rec.ai !== undefined) ids.push(Number(flat[i]));
      }
      compacted += await store.compactRecords(org, ids);
    } while (cursor !== '0');
  }
  logger.debug({ orgs: all.length, compacted }, 'Redis state upgraded: finished records are compacted');
}
