// Finds the windows in which one token's or one organization's counted transfers exceeded the
// limit: how tests prove "no token ever exceeded its window". Sort + two pointers per key.
import type { Rate } from '../core/duration.ts';
import type { LimitViolation, RequestRecord, SimLimits } from './types.ts';

/**
 * Rolling: every window [t, t + windowMs) that starts at a counted request. Any offending window
 * still offends moved to start at its first request, so these are all that matter. A run of
 * overlapping offending windows is reported once, at its fullest.
 */
function rolling(times: Float64Array, rate: Rate): Array<{ windowStart: number; count: number }> {
  const out: Array<{ windowStart: number; count: number }> = [];
  let j = 0;
  let run: { windowStart: number; count: number } | undefined;
  let runEnd = -Infinity;
  for (let i = 0; i < times.length; i++) {
    const start = times[i] ?? 0;
    if (j < i) j = i;
    while (j < times.length && (times[j] ?? 0) < start + rate.windowMs) j++;
    const count = j - i;
    if (count <= rate.max) continue;
    if (run && start < runEnd) {
      if (count > run.count) run = { windowStart: start, count };
    } else {
      if (run) out.push(run);
      run = { windowStart: start, count };
    }
    runEnd = start + rate.windowMs;
  }
  if (run) out.push(run);
  return out;
}

/** Fixed: windows aligned to multiples of windowMs since the epoch. */
function fixed(times: Float64Array, rate: Rate): Array<{ windowStart: number; count: number }> {
  const out: Array<{ windowStart: number; count: number }> = [];
  let i = 0;
  while (i < times.length) {
    const windowStart = Math.floor((times[i] ?? 0) / rate.windowMs) * rate.windowMs;
    let j = i;
    while (j < times.length && (times[j] ?? 0) < windowStart + rate.windowMs) j++;
    if (j - i > rate.max) out.push({ windowStart, count: j - i });
    i = j;
  }
  return out;
}

/**
 * Violations of `limits` by the counted, non-429 transfers of `record`. Rolling by default,
 * whatever the server enforces: the stricter check (a fixed window is a window of that length).
 */
export function findViolations(
  record: readonly RequestRecord[],
  limits: SimLimits | undefined,
  window: 'rolling' | 'fixed' = 'rolling',
): LimitViolation[] {
  if (!limits || (!limits.perToken && !limits.perOrg)) return [];
  const byToken = new Map<string, number[]>();
  const byOrg = new Map<string, number[]>();
  for (const r of record) {
    if (r.countedAt === undefined || r.status === 429 || r.org === null || r.tokenLabel === null) continue;
    push(byToken, r.tokenLabel, r.countedAt);
    push(byOrg, r.org, r.countedAt);
  }
  const out: LimitViolation[] = [];
  const check = (scope: LimitViolation['scope'], groups: Map<string, number[]>, rate: Rate | undefined) => {
    if (!rate) return;
    for (const [key, list] of groups) {
      if (list.length <= rate.max) continue;
      const times = Float64Array.from(list).sort();
      for (const v of (window === 'rolling' ? rolling : fixed)(times, rate)) {
        out.push({ scope, key, ...v, windowMs: rate.windowMs, window, max: rate.max });
      }
    }
  };
  check('token', byToken, limits.perToken);
  check('org', byOrg, limits.perOrg);
  return out.sort((a, b) => a.windowStart - b.windowStart);
}

function push(map: Map<string, number[]>, key: string, value: number): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}
