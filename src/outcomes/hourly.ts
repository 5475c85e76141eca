// Outcomes per hour and organization, for the dashboard's per-hour chart: one hash per (organization,
// hour), code -> count, expiring after two days. Fields starting with '=' count final outcomes
// (`=final`, `=final:<run id>`) for the burn-down (ops/eta/burn-down.ts).
import type { RedisClient } from '../redis/client.ts';
import type { Keys } from '../core/keys.ts';
import { addReads, hashOf, readBatched } from '../redis/batch.ts';

export const HOUR_MS = 3_600_000;
const KEEP_MS = 2 * 86_400_000;
/** The hours kept (KEEP_MS) and read by the burn-down. */
export const HOURS_KEPT = 48;
/** The field of the final outcomes; `=final:<run id>` per run. */
const FINAL_FIELD = '=final';

export function hourIndex(at: number): number {
  return Math.floor(at / HOUR_MS);
}

/**
 * Counts one recorded outcome (every attempt that reached an outcome, waits included), or `n` learners
 * cancelled at once (`cancelled`: they leave the work as surely as a transfer, for a burn-down).
 */
export async function countHourly(
  redis: RedisClient,
  keys: Keys,
  org: string,
  code: string,
  now = Date.now(),
  options: { n?: number; finalByRun?: Readonly<Record<string, number>> } = {},
): Promise<void> {
  const hour = hourIndex(now);
  const key = keys.hourly(org, hour);
  const tx = redis.multi().hincrby(key, code, options.n ?? 1);
  const byRun = Object.entries(options.finalByRun ?? {});
  const finals = byRun.reduce((sum, [, n]) => sum + n, 0);
  if (finals > 0) tx.hincrby(key, FINAL_FIELD, finals);
  for (const [runId, n] of byRun) tx.hincrby(key, `${FINAL_FIELD}:${runId}`, n);
  await tx.pexpireat(key, (hour + 1) * HOUR_MS + KEEP_MS).exec();
}

export interface HourBucket {
  /** Start of the hour (ISO). */
  hour: string;
  /** Outcome code -> count (every attempt that reached an outcome). */
  counts: Record<string, number>;
  /** Learners whose work ended this hour; undefined in an hour an older release wrote. */
  finished?: number;
  /** The same per run id (only the runs that finished some). */
  finishedByRun?: Record<string, number>;
}

/** A bucket from its hash: outcome codes apart from the '=' fields. */
function bucketOf(hour: string, raw: Record<string, string>): HourBucket | null {
  const counts: Record<string, number> = {};
  const byRun: Record<string, number> = {};
  let finished: number | undefined;
  for (const [field, v] of Object.entries(raw)) {
    const n = Number(v);
    if (!Number.isFinite(n) || n === 0) continue;
    if (field === FINAL_FIELD) finished = n;
    else if (field.startsWith(`${FINAL_FIELD}:`)) byRun[field.slice(FINAL_FIELD.length + 1)] = n;
    else if (!field.startsWith('=')) counts[field] = n;
  }
  if (Object.keys(counts).length === 0 && finished === undefined) return null;
  return {
    hour,
    counts,
    ...(finished === undefined ? {} : { finished, finishedByRun: byRun }),
  };
}

/**
 * The hours of the last `hours` (oldest first) that recorded an outcome: empty hours are left out. One
 * call per organization, one pipeline per Redis node.
 */
export async function readHourlyMany(
  redis: RedisClient,
  keys: Keys,
  orgs: readonly string[],
  hours = 24,
  now = Date.now(),
): Promise<HourBucket[][]> {
  const last = hourIndex(now);
  const indexes = Array.from({ length: hours }, (_, i) => last - hours + 1 + i);
  return readBatched(
    redis,
    orgs.map((org) => ({
      slotKey: keys.hourly(org, last),
      add: (pipe) =>
        addReads(
          pipe,
          indexes.map((h) => [keys.hourly(org, h), 'hgetall'] as const),
        ),
      read: (replies) => {
        const hashes = (replies[0] ?? []) as unknown[];
        const buckets: HourBucket[] = [];
        indexes.forEach((h, i) => {
          const b = bucketOf(new Date(h * HOUR_MS).toISOString(), hashOf(hashes[i]));
          if (b) buckets.push(b);
        });
        return buckets;
      },
    })),
  );
}

export async function readHourly(
  redis: RedisClient,
  keys: Keys,
  org: string,
  hours = 24,
  now = Date.now(),
): Promise<HourBucket[]> {
  return (await readHourlyMany(redis, keys, [org], hours, now))[0] ?? [];
}
