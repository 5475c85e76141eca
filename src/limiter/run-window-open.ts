// The run window as the limiter sees it: the calendar fields turned into the UTC instants
// (`open`) acquire.lua reads, and written again past their horizon (decision 15).
import type { Keys } from '../core/keys.ts';
import type { RedisClient } from '../redis/client.ts';
import { LIMITER_SCRIPTS } from './scripts.ts';
import { openAt, openIntervals, scheduleOf, type RunSchedule, type RunWindowTexts } from './run-window.ts';

// Said where the calendar is read, which the flags of `limits set` load without the scripts.
export { scheduleOf, type RunWindowTexts };

/** How far ahead the stored instants reach: a fortnight (a few dozen intervals at most). */
export const OPEN_HORIZON_MS = 14 * 86_400_000;
/** The instants start this long before they were computed (a Redis clock a little behind). */
const OPEN_LOOKBACK_MS = 60_000;

/** The `open` field for a schedule from `fromMs`: "horizon s1 e1 s2 e2 ..." (Redis-clock ms). */
export function encodeOpen(schedule: RunSchedule, fromMs: number): string {
  const from = Math.floor(fromMs) - OPEN_LOOKBACK_MS;
  const horizon = Math.floor(fromMs) + OPEN_HORIZON_MS;
  const parts = [String(horizon)];
  for (const [s, e] of openIntervals(schedule, from, horizon)) parts.push(String(s), String(e));
  return parts.join(' ');
}

/** How long an unreadable calendar keeps the organization closed before it is read again. */
const UNREADABLE_RECHECK_MS = 3_600_000;

/**
 * Writes the organization's `open` field again from its calendar fields, as of `nowMs` (Redis's clock,
 * from the acquire that found it stale), unless they changed meanwhile (refresh-open.lua). A calendar
 * this host cannot read (a time zone its ICU lacks, a hand edit) closes the organization for an hour, and
 * is read again then: nothing is sent at an hour nobody chose. Returns the reason it was unreadable,
 * for the caller to say, or null.
 */
export async function refreshOpen(
  redis: RedisClient,
  keys: Keys,
  org: string,
  nowMs: number,
): Promise<string | null> {
  const [windows, tz, blackout] = (await redis.hmget(keys.policy(org), 'runWindow', 'tz', 'blackout')).map(
    (v) => v ?? '',
  ) as [string, string, string];
  let open = '';
  let unreadable: string | null = null;
  try {
    const schedule = scheduleOf({ windows, tz, blackout });
    open = schedule ? encodeOpen(schedule, nowMs) : '';
  } catch (err) {
    unreadable = (err as Error).message;
    open = String(Math.floor(nowMs) + UNREADABLE_RECHECK_MS);
  }
  await LIMITER_SCRIPTS.run(redis, 'refresh-open', [keys.policy(org)], [windows, tz, blackout, open]);
  return unreadable;
}

/**
 * When the limiter is open, as the ETA must see it: the stored instants up to their horizon (exactly what
 * acquire.lua reads), the calendar after it (what the next refresh will write). Returns, for an instant t
 * (ms since the epoch), the open interval containing t or the next one; null when it never opens. null
 * itself when no run window is set.
 */
export function openLookup(
  stored: RunWindowTexts & { open: string },
): { schedule: RunSchedule; horizon: number; at: (t: number) => [number, number] | null } | null {
  const schedule = scheduleOf(stored);
  if (!schedule) return null;
  const nums = stored.open.split(' ').filter(Boolean).map(Number);
  const horizon = nums.length > 0 && Number.isFinite(nums[0]) ? (nums[0] as number) : -Infinity;
  const intervals: Array<[number, number]> = [];
  for (let i = 1; i + 1 < nums.length; i += 2) intervals.push([nums[i] as number, nums[i + 1] as number]);
  const calendar = (t: number) => openAt(schedule, t);
  const at = (t: number): [number, number] | null => {
    if (t >= horizon) return calendar(t);
    for (const [s, e] of intervals) {
      if (e <= t) continue;
      // An interval cut at the horizon goes on as long as the calendar's does.
      const after = e >= horizon ? calendar(horizon) : null;
      return after && after[0] <= horizon ? [s, Math.max(e, after[1])] : [s, e];
    }
    // Closed from the last stored instant to the horizon, whatever the calendar says of that time.
    const next = calendar(horizon);
    return next ? [Math.max(next[0], horizon), next[1]] : null;
  };
  return { schedule, horizon, at };
}
