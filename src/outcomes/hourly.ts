// Outcomes per hour and organization, for the dashboard's "transfers per hour over the last day" chart.
// One small hash per (organization, hour): outcome code -> count, written by the worker after each
// recorded outcome and expiring after two days, so it stays bounded over a weeks-long migration. The
// limiter logs cannot serve here: they only hold one window (an hour per token), not a day of outcomes.
import type { RedisClient } from '../redis/client.ts';
import type { Keys } from '../core/keys.ts';

export const HOUR_MS = 3_600_000;
const KEEP_MS = 2 * 86_400_000;

export function hourIndex(at: number): number {
  return Math.floor(at / HOUR_MS);
}

/** Counts one recorded outcome (every attempt that reached an outcome, waits included). */
export async function countHourly(
  redis: RedisClient,
  keys: Keys,
  org: string,
  code: string,
  now = Date.now(),
): Promise<void> {
  const hour = hourIndex(now);
  const key = keys.hourly(org, hour);
  await redis
    .multi()
    .hincrby(key, code, 1)
    .pexpireat(key, (hour + 1) * HOUR_MS + KEEP_MS)
    .exec();
}

export interface HourBucket {
  /** Start of the hour (ISO). */
  hour: string;
  /** Outcome code -> count. */
  counts: Record<string, number>;
}

/** The last `hours` hours (oldest first, the current hour last), in one round trip. */
export async function readHourly(
  redis: RedisClient,
  keys: Keys,
  org: string,
  hours = 24,
  now = Date.now(),
): Promise<HourBucket[]> {
  const last = hourIndex(now);
  const indexes = Array.from({ length: hours }, (_, i) => last - hours + 1 + i);
  const pipe = redis.pipeline();
  for (const h of indexes) pipe.hgetall(keys.hourly(org, h));
  const replies = (await pipe.exec()) ?? [];
  return indexes.map((h, i) => {
    const raw = (replies[i]?.[1] ?? {}) as Record<string, string>;
    const counts: Record<string, number> = {};
    for (const [code, n] of Object.entries(raw)) counts[code] = Number(n);
    return { hour: new Date(h * HOUR_MS).toISOString(), counts };
  });
}
