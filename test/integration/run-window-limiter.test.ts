// The run window from the calendar to the limiter, on the real Redis: `limits set --run-window` (setLimits)
// stores the calendar and the UTC instants acquire.lua reads; outside the window acquire refuses with the
// exact wait until it opens (no polling: the caller sleeps that long); instants past their horizon are
// written again from the calendar by the acquire that finds them stale; a blackout alone closes its days;
// `limits reset --run-window` opens every hour again, and a plain `limits reset` keeps the window.
import { afterAll, describe, expect, it } from 'vitest';
import { TransferBudget } from '../../src/limiter/index.ts';
import { envDifferences, readPolicy } from '../../src/limiter/policy.ts';
import { runWindowOf } from '../../src/ops/views/limits.ts';
import { resetLimits, resetRunWindow, setLimits } from '../../src/limiter/policy-control.ts';
import { OPEN_HORIZON_MS, scheduleOf } from '../../src/limiter/run-window-open.ts';
import { openAt } from '../../src/limiter/run-window.ts';
import { deletePrefix, newRedis, randomPrefix } from '../helpers/redis.ts';

const redis = newRedis();
const prefixes: string[] = [];
afterAll(async () => {
  for (const p of prefixes) await deletePrefix(redis, p);
  redis.disconnect();
});

const limits = {
  limitPerToken: { max: 100, windowMs: 3_600_000 },
  limitPerOrg: { max: 1000, windowMs: 86_400_000 },
};

function budget(): TransferBudget {
  const prefix = randomPrefix('runwin');
  prefixes.push(prefix);
  return new TransferBudget(redis, { prefix, ...limits, inflightTtlMs: 5000 });
}

/** "HH:MM" of a UTC instant. */
const hhmm = (ms: number) => new Date(ms).toISOString().slice(11, 16);

describe('run window in the limiter', () => {
  it('refuses outside the window with the exact wait until it opens, and grants inside it', async () => {
    const b = budget();
    // A daily window that opens in about two hours and lasts one (UTC): closed now.
    const now = Date.now();
    const opens = Math.ceil((now + 2 * 3_600_000) / 60_000) * 60_000;
    const windows = `all ${hhmm(opens)}-${hhmm(opens + 3_600_000)}`;
    await setLimits(redis, b.keys, 'acme', { runWindow: { windows, tz: 'UTC' } }, limits, 'test');
    const stored = await redis.hgetall(b.keys.policy('acme'));
    expect(stored.runWindow).toBe(windows);
    const [horizon] = (stored.open ?? '').split(' ').map(Number);
    expect(horizon).toBeGreaterThanOrEqual(now + OPEN_HORIZON_MS);
    const refused = await b.acquire('acme', ['t1']);
    if (refused.ok) throw new Error('granted outside the run window');
    expect(refused.scope).toBe('run-window');
    expect(refused.allBlockedIndefinitely).toBe(false);
    expect(refused.now + refused.waitMs).toBe(opens);
    // The same from the calendar, as status and the ETA read it.
    const schedule = scheduleOf({ windows, tz: 'UTC', blackout: '' });
    expect(schedule && openAt(schedule, refused.now)?.[0]).toBe(opens);
    // A window open now: granted.
    await setLimits(
      redis,
      b.keys,
      'acme',
      { runWindow: { windows: `all ${hhmm(now - 3_600_000)}-${hhmm(now + 3_600_000)}` } },
      limits,
      'test',
    );
    expect((await b.acquire('acme', ['t1'])).ok).toBe(true);
  });

  it('writes the instants again from the calendar when they are past their horizon', async () => {
    const b = budget();
    await setLimits(
      redis,
      b.keys,
      'acme',
      { runWindow: { windows: 'all all', tz: 'Europe/Berlin' } },
      limits,
      'test',
    );
    // As left by a process that stopped weeks ago: the horizon has passed.
    await redis.hset(b.keys.policy('acme'), 'open', String(Date.now() - 1000));
    const r = await b.acquire('acme', ['t1']);
    expect(r.ok).toBe(true);
    const [horizon, s, e] = ((await redis.hget(b.keys.policy('acme'), 'open')) ?? '').split(' ').map(Number);
    expect(horizon).toBeGreaterThan(Date.now() + OPEN_HORIZON_MS - 60_000);
    expect(s).toBeLessThanOrEqual(Date.now());
    expect(e).toBe(horizon);
  });

  it('closes the days of a blackout alone, and reset --run-window opens every hour again', async () => {
    const b = budget();
    const today = new Date().toISOString().slice(0, 10);
    await setLimits(redis, b.keys, 'acme', { runWindow: { blackout: `${today}..${today}` } }, limits, 'test');
    const refused = await b.acquire('acme', ['t1']);
    if (refused.ok) throw new Error('granted on a blackout day');
    expect(refused.scope).toBe('run-window');
    // Opens at the next UTC midnight.
    expect(refused.now + refused.waitMs).toBe(Date.parse(`${today}T00:00:00Z`) + 86_400_000);
    // A plain reset keeps the window: resetting limits never opens the school day.
    await resetLimits(redis, b.keys, 'acme', limits, 'test');
    expect((await b.acquire('acme', ['t1'])).ok).toBe(false);
    const r = await resetRunWindow(redis, b.keys, 'acme', 'test');
    expect(r.after.runWindow).toBeNull();
    expect(await redis.hget(b.keys.policy('acme'), 'open')).toBeNull();
    expect((await b.acquire('acme', ['t1'])).ok).toBe(true);
  });

  it('a calendar this host cannot read keeps the organization closed for an hour, says so, and never fails a status', async () => {
    const named: string[] = [];
    const prefix = randomPrefix('runwin');
    prefixes.push(prefix);
    const b = new TransferBudget(redis, {
      prefix,
      ...limits,
      inflightTtlMs: 5000,
      onMalformedPolicy: (_org, fields) => named.push(...fields.map((f) => f.field)),
    });
    // As a hand edit (or a zone this host's ICU lacks) would leave it, with stale instants.
    await redis.hset(b.keys.policy('acme'), {
      runWindow: 'Mon-Fry 18:00-07:00',
      tz: 'UTC',
      open: String(Date.now() - 1),
    });
    const r = await b.acquire('acme', ['t1']);
    if (r.ok) throw new Error('granted with an unreadable run window');
    expect(r.scope).toBe('run-window');
    expect(r.waitMs).toBeGreaterThan(3_500_000);
    expect(named).toEqual(['runWindow']);
    const view = await b.peek('acme', ['t1']);
    expect(runWindowOf(view, view.now)).toMatchObject({
      open: false,
      now: expect.stringMatching(/^unreadable here \(.*'Fry'/),
    });
  });

  it('LIMIT_BURST that differs from the stored burst is named, as LIMIT_PER_* are', async () => {
    const b = budget();
    await setLimits(redis, b.keys, 'acme', { burst: { count: 5 } }, limits, 'test');
    const policy = await readPolicy(redis, b.keys, 'acme');
    expect(envDifferences(policy, { ...limits, burst: { percent: 100 } })).toEqual([
      { variable: 'LIMIT_BURST', env: '100%', stored: '5' },
    ]);
    expect(envDifferences(policy, { ...limits, burst: { count: 5 } })).toEqual([]);
  });
});
