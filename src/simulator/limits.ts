// Enforces the transfer limits as a real service could: per token and per organization, rolling
// or fixed window. Only a request both scopes admit uses budget; a refused one gets the wait
// until a slot frees (the 429's Retry-After).
import type { Rate } from '../core/duration.ts';
import type { RequestRecord, SimLimits } from './types.ts';

export type Admission = { ok: true } | { ok: false; retryAfterMs: number; scope: 'token' | 'org' };

/** Counted times of one scope key, oldest first; a head index avoids O(n) shifts when pruning. */
class TimeLog {
  private times: number[] = [];
  private head = 0;

  get size(): number {
    return this.times.length - this.head;
  }

  at(i: number): number {
    return this.times[this.head + i] ?? 0;
  }

  push(t: number): void {
    this.times.push(t);
  }

  sort(): void {
    this.times = this.times.slice(this.head).sort((a, b) => a - b);
    this.head = 0;
  }

  /** Drops entries before `from` (they can no longer matter to the window). */
  dropBefore(from: number): void {
    while (this.head < this.times.length && (this.times[this.head] ?? 0) < from) this.head++;
    if (this.head > 1024 && this.head * 2 > this.times.length) {
      this.times = this.times.slice(this.head);
      this.head = 0;
    }
  }
}

/** Milliseconds until the log admits one more request at `now`, or 0 when it has room already. */
function waitFor(log: TimeLog, rate: Rate, window: SimLimits['window'], now: number): number {
  if (window === 'fixed') {
    const start = Math.floor(now / rate.windowMs) * rate.windowMs;
    log.dropBefore(start);
    return log.size >= rate.max ? start + rate.windowMs - now : 0;
  }
  // Rolling: the window ending now holds the times t with now - windowMs < t <= now.
  log.dropBefore(now - rate.windowMs + 1);
  if (log.size < rate.max) return 0;
  return log.at(log.size - rate.max) + rate.windowMs - now;
}

export class SimLimiter {
  private limits: SimLimits | undefined;
  private readonly logs = new Map<string, TimeLog>();

  get current(): SimLimits | undefined {
    return this.limits;
  }

  /**
   * Installs new limits. The budget already spent is rebuilt from the record (counted, non-429
   * transfers), so changing the limits mid-run does not forget what the service has counted.
   */
  set(limits: SimLimits | undefined, record: readonly RequestRecord[]): void {
    this.limits = limits;
    this.logs.clear();
    if (!limits) return;
    for (const r of record) {
      if (r.countedAt === undefined || r.status === 429 || r.org === null || r.tokenLabel === null) continue;
      this.log(`t:${r.tokenLabel}`).push(r.countedAt);
      this.log(`o:${r.org}`).push(r.countedAt);
    }
    for (const log of this.logs.values()) log.sort();
  }

  /** Counts a request of `tokenLabel` (of `org`) at `now` unless a limit refuses it. */
  admit(tokenLabel: string, org: string, now: number): Admission {
    const limits = this.limits;
    if (!limits) return { ok: true };
    const tokenLog = this.log(`t:${tokenLabel}`);
    const orgLog = this.log(`o:${org}`);
    const tokenWait = limits.perToken ? waitFor(tokenLog, limits.perToken, limits.window, now) : 0;
    const orgWait = limits.perOrg ? waitFor(orgLog, limits.perOrg, limits.window, now) : 0;
    if ((tokenWait > 0 || orgWait > 0) && limits.enforce !== false) {
      return {
        ok: false,
        retryAfterMs: Math.max(tokenWait, orgWait),
        scope: tokenWait >= orgWait ? 'token' : 'org',
      };
    }
    tokenLog.push(now);
    orgLog.push(now);
    return { ok: true };
  }

  private log(key: string): TimeLog {
    let log = this.logs.get(key);
    if (!log) {
      log = new TimeLog();
      this.logs.set(key, log);
    }
    return log;
  }
}
