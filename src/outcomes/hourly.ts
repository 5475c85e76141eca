// Outcomes per hour and organization, for the dashboard's "transfers per hour over the last day" chart.
// One small hash per (organization, hour): outcome code -> count, written by the worker after each
// recorded outcome and expiring after two days, so it stays bounded over a weeks-long migration. The
// limiter logs cannot serve here: they only hold one window (an hour per token), not a day of outcomes.
import type { RedisClient } from '../redis/client.ts';
import type { Keys } from '../core/keys.ts';
import { addReads, hashOf, readBatched } from '../redis/batch.ts';

export const HOUR_MS = 3_600_000;
const KEEP_MS = 2 * 86_400_000;

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
  n = 1,
): Promise<void> {
  const hour = hourIndex(now);
  const key = keys.hourly(org, hour);
  await redis
    .multi()
    .hincrby(key, code, n)
    .pexpireat(key, (hour + 1) * HOUR_MS + KEEP_MS)
    .exec();
}

export interface HourBucket {
  /** Start of the hour (ISO). */
  hour: string;
  /** Outcome code -> count. */
  counts: Record<string, number>;
}

/**
 * The hours of the last `hours` (oldest first, the current hour last) that recorded an outcome: an hour
 * with none is left out, so a day of a quiet organization costs nothing to send (24 x 1,000 empty
 * buckets did). One call per organization (its hours share its slot), one pipeline per Redis node.
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
          const raw = hashOf(hashes[i]);
          const counts: Record<string, number> = {};
          for (const [code, n] of Object.entries(raw)) if (Number(n) !== 0) counts[code] = Number(n);
          if (Object.keys(counts).length > 0)
            buckets.push({ hour: new Date(h * HOUR_MS).toISOString(), counts });
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
