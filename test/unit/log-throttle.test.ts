// A repeated error is logged as one: the first at once, then one line per interval with the count, and a
// summary on stop. Through a real pino logger writing JSON lines, as the workers' logger does.
// The throttle's windows are pure time arithmetic (setTimeout and Date.now): fake timers, so a busy
// machine can neither add a window nor lose one.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../src/core/log.ts';
import { LogThrottle, stripNumbers } from '../../src/core/log-throttle.ts';

interface Line {
  level: number;
  msg: string;
  org?: string;
  err?: string;
  repeated?: number;
}

function capture() {
  const raw: string[] = [];
  const logger = createLogger({ level: 'debug', destination: { write: (l: string) => void raw.push(l) } });
  return { logger, lines: () => raw.map((l) => JSON.parse(l) as Line) };
}

/** Repeats counted in the summary lines plus the first occurrences: every call accounted for. */
function accounted(lines: Line[]): number {
  return lines.reduce((n, l) => n + (l.repeated ?? 1), 0);
}

beforeEach(() => {
  vi.useFakeTimers({ now: 0 });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('LogThrottle', () => {
  it('10,000 errors in a second: fewer than 5 lines, and the count is right', () => {
    const { logger, lines } = capture();
    const throttle = new LogThrottle(logger); // the default interval, 10 s
    for (let i = 0; i < 10_000; i++) {
      // A Redis outage as the workers see it: the port and the attempt number vary, the error does not.
      throttle.warn(
        { org: i % 2 ? 'acme' : 'beta', err: `connect ECONNREFUSED 127.0.0.1:${6379 + (i % 3)} (#${i})` },
        'worker error',
      );
      if (i % 1000 === 999) vi.advanceTimersByTime(80); // spread over most of a second
    }
    throttle.stop();
    const out = lines();
    expect(out.length).toBeLessThan(5);
    expect(out).toHaveLength(2);
    expect(out[0]).toMatchObject({ level: 40, msg: 'worker error', org: 'beta' });
    expect(out[0]?.err).toBe('connect ECONNREFUSED 127.0.0.1:6379 (#0)');
    expect(out[1]?.msg).toBe('worker error (repeated 9,999 times in the last 800 ms)');
    expect(out[1]?.repeated).toBe(9_999);
    // The organization varied among the repeats: the summary does not pretend it was one.
    expect(out[1]?.org).toBeUndefined();
    expect(out[1]?.level).toBe(40);
    expect(accounted(out)).toBe(10_000);
  });

  it('one line per interval while it repeats; after a quiet interval the next one is logged at once', () => {
    const { logger, lines } = capture();
    const throttle = new LogThrottle(logger, { intervalMs: 200 });
    let sent = 0;
    // 100 calls every 10 ms for a second.
    for (let t = 0; t < 1000; t += 10) {
      for (let i = 0; i < 100; i++, sent++)
        throttle.error({ err: 'READONLY You cannot write' }, 'redis error');
      vi.advanceTimersByTime(10);
    }
    vi.advanceTimersByTime(250); // the next window has no repeat: no line, and the key is forgotten
    const during = lines();
    // The first call at once, then one summary per 200 ms over the second (at 200, 400, ..., 1000).
    expect(during.map((l) => l.msg)).toEqual([
      'redis error',
      'redis error (repeated 1,999 times in the last 200 ms)',
      'redis error (repeated 2,000 times in the last 200 ms)',
      'redis error (repeated 2,000 times in the last 200 ms)',
      'redis error (repeated 2,000 times in the last 200 ms)',
      'redis error (repeated 2,000 times in the last 200 ms)',
    ]);
    expect(accounted(during)).toBe(sent);

    vi.advanceTimersByTime(500); // a whole interval with no repeat: forgotten
    throttle.error({ err: 'READONLY You cannot write' }, 'redis error');
    const after = lines().slice(during.length);
    expect(after).toEqual([
      expect.objectContaining({ msg: 'redis error', err: 'READONLY You cannot write' }),
    ]);
    throttle.stop();
    expect(lines()).toHaveLength(during.length + 1); // nothing repeated since: no summary
  });

  it('keys: numbers do not make another error; another message or a given key does', () => {
    const { logger, lines } = capture();
    const throttle = new LogThrottle(logger);
    throttle.warn({ err: 'read ECONNRESET after 12 ms' }, 'redis connection error');
    throttle.warn({ err: 'read ECONNRESET after 3405 ms' }, 'redis connection error');
    throttle.warn({ err: 'OOM command not allowed' }, 'redis connection error');
    throttle.warn({ err: 'read ECONNRESET after 1 ms' }, 'worker error');
    throttle.warn({ org: 'acme', err: 'x' }, 'worker error', 'per-org:acme');
    throttle.warn({ org: 'beta', err: 'x' }, 'worker error', 'per-org:beta');
    throttle.warn({ org: 'beta', err: 'x' }, 'worker error', 'per-org:beta');
    expect(lines()).toHaveLength(5);
    throttle.flush();
    const summaries = lines().slice(5);
    expect(summaries.map((l) => [l.msg.replace(/ in the last .*/, ''), l.repeated])).toEqual([
      ['redis connection error (repeated 1 time', 1],
      ['worker error (repeated 1 time', 1],
    ]);
    expect(summaries[1]?.org).toBe('beta');
    throttle.stop();
    expect(lines()).toHaveLength(7);
    expect(stripNumbers('127.0.0.1:6379')).toBe('#.#.#.#:#');
  });
});
