// Learning the service's real limits from its 429s: learn.lua counts what the service
// had accepted, lowers the limit in force below it (never raises it), and acquire/peek apply the learned
// limit and probe it back up with Redis TIME. Real Redis, compressed real time (windows of 100s of ms):
// the scripts read Redis's clock, so the probe is checked against peek's own `now`, never a fake clock.
// Where a test needs the probe at a given step, it moves the learned limit's time (`at`, stored in the
// policy hash) back by whole probe periods instead of sleeping through them: the formula reads only
// `now - at`, and a stalled test cannot skip a step or land on the wrong one.
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { readChanges } from '../../src/limiter/control-log.ts';
import type { Rate } from '../../src/core/duration.ts';
import { TransferBudget, type Acquired } from '../../src/limiter/index.ts';
import { readPolicy, seedPolicy } from '../../src/limiter/policy.ts';
import { resetLimits, setLimits } from '../../src/limiter/policy-control.ts';
import { deletePrefix, newRedis, randomPrefix } from '../helpers/redis.ts';
import { granted } from '../helpers/limiter.ts';

const redis = newRedis();
const prefix = randomPrefix('learn');
let orgs = 0;
const newOrg = () => `lorg${++orgs}`;
const WHO = 'cli:tester@host';

afterAll(async () => {
  await deletePrefix(redis, prefix);
  await redis.quit();
});

function budget(limitPerToken: Rate, limitPerOrg: Rate, inflightTtlMs = 5_000): TransferBudget {
  return new TransferBudget(redis, { prefix, limitPerToken, limitPerOrg, inflightTtlMs });
}

/** `n` permits on `pool`, each settled as answered (the service counted or refused them). */
async function sendAll(b: TransferBudget, org: string, pool: string[], n: number): Promise<Acquired[]> {
  const out: Acquired[] = [];
  for (let i = 0; i < n; i++) {
    const p = granted(await b.acquire(org, pool));
    await b.settle(org, p.tokenId, p.permitId);
    out.push(p);
  }
  return out;
}

/** Acquires (and settles) until refused; the permits granted. */
async function drain(b: TransferBudget, org: string, pool: string[]): Promise<number> {
  for (let n = 0; n < 1000; n++) {
    const r = await b.acquire(org, pool);
    if (!r.ok) return n;
    await b.settle(org, r.tokenId, r.permitId);
  }
  throw new Error('drain: never refused');
}

const hash = (org: string, b: TransferBudget) => redis.hgetall(b.keys.policy(org));

async function redisNow(): Promise<number> {
  const [seconds, micros] = await redis.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

/** Sets when a token's learned limit was learned (as learn.lua writes it: "max at"). */
async function learnedAt(org: string, b: TransferBudget, token: string, max: number, at: number) {
  await redis.hset(b.keys.policy(org), `learned:tok:${token}`, `${max} ${at}`);
}

/** The probe (acquire.lua "Learned limits"): min(configured, max + step * floor((now - at) / every)). */
function probed(max: number, at: number, now: number, configured: number, windowMs: number): number {
  const every = Math.max(windowMs, Math.min(4 * windowMs, 3_600_000));
  const step = Math.max(1, Math.floor(configured / 20));
  return Math.min(configured, max + step * Math.floor((now - at) / every));
}

describe('learn from a 429', () => {
  it('learns what the service accepted below the limit, for every process; counts the 429', async () => {
    const org = newOrg();
    const b = budget({ max: 5, windowMs: 60_000 }, { max: 100, windowMs: 60_000 });
    await seedPolicy(redis, b.keys, org, b.options);
    const p = await sendAll(b, org, ['t1'], 5);
    // The service accepted 3, refused the 4th and the 5th (sent after it).
    const first = await b.learn(org, 't1', p[3]!.permitId, 1);
    expect(first).toMatchObject({
      rateLimited: 1,
      cause: 'token',
      token: { accepted: 3, limit: 5, learned: 3 },
      org: { learned: null },
    });
    // The 5th: the service had accepted the same 3 (the 4th was refused): at the limit, nothing more.
    const second = await b.learn(org, 't1', p[4]!.permitId, 1);
    expect(second).toMatchObject({ rateLimited: 2, token: { accepted: 3, limit: 3, learned: null } });
    // The same permit again (a retried call) changes nothing.
    expect((await b.learn(org, 't1', p[4]!.permitId, 1)).cause).toBe('repeat');

    const stored = await readPolicy(redis, b.keys, org);
    expect(stored.learned.tokens.t1?.max).toBe(3);
    expect(stored.rateLimited).toEqual({ t1: 2 });
    expect(stored.stored).toBe(true);
    // Another process with a laxer environment applies it too: its view and its acquire.
    const other = budget({ max: 50, windowMs: 60_000 }, { max: 500, windowMs: 60_000 });
    const view = await other.peek(org, ['t1']);
    expect(view.tokens[0]).toMatchObject({ limit: 3, rateLimited: 2, used: 5, remaining: 0 });
    expect(view.tokens[0]?.learned).toMatchObject({ max: 3, configured: 5 });
    expect(view.org.learned).toBeUndefined();
  });

  it('acquire grants no more than the learned limit in a fresh window', async () => {
    const org = newOrg();
    const b = budget({ max: 6, windowMs: 300 }, { max: 100, windowMs: 60_000 });
    const p = await sendAll(b, org, ['t1'], 6);
    expect((await b.learn(org, 't1', p[4]!.permitId, 1)).token.learned).toBe(4);
    await sleep(320); // the window of the first six has passed
    // Learned now, as far as the probe (every 1.2 s) goes: however long the sleep took.
    await learnedAt(org, b, 't1', 4, await redisNow());
    expect(await drain(b, org, ['t1'])).toBe(4);
    // Without a policy hash of limits, learned fields alone are not a stored policy.
    expect((await readPolicy(redis, b.keys, org)).stored).toBe(false);
    expect((await b.peek(org, ['t1'])).policyStored).toBe(false);
  });

  it('does not learn at the limit in force, and never raises a learned limit', async () => {
    const org = newOrg();
    const b = budget({ max: 10, windowMs: 60_000 }, { max: 100, windowMs: 60_000 });
    await seedPolicy(redis, b.keys, org, b.options);
    const p = await sendAll(b, org, ['t1'], 5);
    // Lowered by hand to 2 after the five were sent: the 429 of the 3rd finds 2 accepted = the limit.
    await setLimits(redis, b.keys, org, { perToken: { max: 2, windowMs: 60_000 } }, b.options, WHO);
    const atLimit = await b.learn(org, 't1', p[2]!.permitId, 1);
    expect(atLimit.token).toEqual({ accepted: 2, limit: 2, learned: null });
    expect((await readPolicy(redis, b.keys, org)).learned.tokens).toEqual({});

    await setLimits(redis, b.keys, org, { perToken: { max: 10, windowMs: 60_000 } }, b.options, WHO);
    // The 2nd refused: the service had accepted the 1st only.
    expect((await b.learn(org, 't1', p[1]!.permitId, 1)).token.learned).toBe(1);
    const before = (await hash(org, b))['learned:tok:t1'];
    // The 5th refused: the service had accepted the 1st and the 4th (the 2nd and 3rd were refused), more
    // than the learned 1: never raised, and its time is kept (the probe goes on).
    const higher = await b.learn(org, 't1', p[4]!.permitId, 1);
    expect(higher.token).toEqual({ accepted: 2, limit: 1, learned: null });
    expect((await hash(org, b))['learned:tok:t1']).toBe(before);
    expect((await readPolicy(redis, b.keys, org)).rateLimited).toEqual({ t1: 3 });
  });

  it('counts permits in flight acquired before the refused one, not those acquired after', async () => {
    const org = newOrg();
    const b = budget({ max: 10, windowMs: 60_000 }, { max: 100, windowMs: 60_000 });
    const a = granted(await b.acquire(org, ['t1'])); // in flight: sent before
    const refusedOne = granted(await b.acquire(org, ['t1']));
    granted(await b.acquire(org, ['t1'])); // in flight, sent after
    await b.settle(org, 't1', refusedOne.permitId);
    expect((await b.learn(org, 't1', refusedOne.permitId, 1)).token).toEqual({
      accepted: 1,
      limit: 10,
      learned: 1,
    });
    await b.settle(org, 't1', a.permitId);
  });

  it('probes back up one step every 4 windows, then forgets the learned limit', async () => {
    const org = newOrg();
    // 500 ms windows: a probe step every 2 s; the configured 6 is one step above the learned 5.
    const window = 500;
    const b = budget({ max: 40, windowMs: window }, { max: 1000, windowMs: 60_000 });
    await setLimits(redis, b.keys, org, { perToken: { max: 6, windowMs: window } }, b.options, WHO);
    const p = await sendAll(b, org, ['t1'], 6);
    expect((await b.learn(org, 't1', p[5]!.permitId, 1)).token.learned).toBe(5);
    const at = Number((await hash(org, b))['learned:tok:t1']?.split(' ')[1]);

    const v1 = await b.peek(org, ['t1']);
    const t1 = v1.tokens[0]!;
    expect(t1.limit).toBe(probed(5, at, v1.now, 6, window));
    expect(t1.learned).toEqual({
      max: 5,
      at,
      configured: 6,
      nextProbeInMs: at + 4 * window * (Math.floor((v1.now - at) / (4 * window)) + 1) - v1.now,
    });
    await sleep(t1.learned!.nextProbeInMs + 20);
    const v2 = await b.peek(org, ['t1']);
    // Probed back to the configured limit: no learned limit in force any more (peek forgets nothing).
    expect(v2.tokens[0]?.limit).toBe(6);
    expect(v2.tokens[0]?.learned).toBeUndefined();
    expect((await hash(org, b))['learned:tok:t1']).toBeDefined();
    // The next acquire forgets it.
    granted(await b.acquire(org, ['t1']));
    expect((await hash(org, b))['learned:tok:t1']).toBeUndefined();
  });

  it('the step is 5% of the configured limit, and the limit in force follows the formula', async () => {
    const org = newOrg();
    // A minute's window: a probe step every 4 minutes, so each step below is minutes wide.
    const window = 60_000;
    const every = 4 * window;
    const b = budget({ max: 100, windowMs: window }, { max: 10_000, windowMs: 60_000 });
    // 40 in flight (counted whatever the window) before the refused one.
    for (let i = 0; i < 40; i++) granted(await b.acquire(org, ['t1']));
    const [last] = await sendAll(b, org, ['t1'], 1);
    expect((await b.learn(org, 't1', last!.permitId, 1)).token.learned).toBe(40);
    // Learned k probe periods (and half of one) ago: the limit in force is 40 + 5k, to the configured 100.
    for (let k = 0; k <= 13; k++) {
      await learnedAt(org, b, 't1', 40, (await redisNow()) - k * every - every / 2);
      const v = await b.peek(org, ['t1']);
      const at = Number((await hash(org, b))['learned:tok:t1']?.split(' ')[1]);
      expect(v.tokens[0]?.limit, `step ${k}`).toBe(probed(40, at, v.now, 100, window));
      expect(v.tokens[0]?.limit, `step ${k}`).toBe(Math.min(100, 40 + 5 * k));
      // Below the configured limit the learned one is in force; at it, nothing learned is.
      if (k < 12) expect(v.tokens[0]?.learned?.max).toBe(40);
      else expect(v.tokens[0]?.learned).toBeUndefined();
    }
  });

  it('a new 429 during the probe sets it again from what the service accepted', async () => {
    const org = newOrg();
    const window = 1500;
    const b = budget({ max: 10, windowMs: window }, { max: 1000, windowMs: 60_000 });
    let p = await sendAll(b, org, ['t1'], 5);
    expect((await b.learn(org, 't1', p[4]!.permitId, 1)).token.learned).toBe(4);
    await sleep(window + 20); // the five have left the window
    // One probe step in force (learned 6 windows ago: step 1 runs from 4 to 8 windows after it).
    await learnedAt(org, b, 't1', 4, (await redisNow()) - 6 * window);
    expect((await b.peek(org, ['t1'])).tokens[0]?.limit).toBe(5);
    p = await sendAll(b, org, ['t1'], 5);
    const again = await b.learn(org, 't1', p[4]!.permitId, 1);
    expect(again.token).toEqual({ accepted: 4, limit: 5, learned: 4 });
    const v = await b.peek(org, ['t1']);
    expect(v.tokens[0]?.limit).toBe(4);
    const at = Number((await hash(org, b))['learned:tok:t1']?.split(' ')[1]);
    // Learned again now: its time is this 429's (Redis's clock), not the earlier one.
    expect(at).toBeGreaterThan(v.now - 6 * window + window);
    expect(at).toBeLessThanOrEqual(v.now);
  });
});

describe('the organization scope', () => {
  const tokenWindow = 600;

  /** Two tokens of 10 each, the org 100: both learn 5, then their windows pass. */
  async function twoLearnedTokens(org: string, b: TransferBudget): Promise<void> {
    for (const t of ['ta', 'tb']) {
      const p = await sendAll(b, org, [t], 6);
      expect((await b.learn(org, t, p[5]!.permitId, 2)).token.learned).toBe(5);
    }
    await sleep(tokenWindow + 20);
  }

  it('two tokens refused well below their learned limit within one org window teach the org limit', async () => {
    const org = newOrg();
    const b = budget({ max: 10, windowMs: tokenWindow }, { max: 100, windowMs: 60_000 });
    await twoLearnedTokens(org, b);
    // ta is refused on its first request of a fresh window: not its own limit (5) that refused it.
    const [a] = await sendAll(b, org, ['ta'], 1);
    const refutedA = await b.learn(org, 'ta', a!.permitId, 2);
    expect(refutedA).toMatchObject({ cause: 'org', token: { accepted: 0, limit: 5, learned: null } });
    expect(refutedA.org.learned).toBeNull(); // one token is not enough evidence
    expect((await hash(org, b))['learned:tok:ta']).toMatch(/^5 /); // ta keeps its limit
    const [c] = await sendAll(b, org, ['tb'], 1);
    const refutedB = await b.learn(org, 'tb', c!.permitId, 2);
    // The org had accepted 5 + 5 (the refused ones left out) in its 60 s window.
    expect(refutedB).toMatchObject({ cause: 'org', org: { accepted: 10, limit: 100, learned: 10 } });
    const view = await b.peek(org, ['ta', 'tb']);
    expect(view.org.limit).toBe(10);
    expect(view.org.learned).toMatchObject({ max: 10, configured: 100 });
    expect(view.tokens.map((t) => t.rateLimited)).toEqual([2, 2]);
  });

  it('two tokens refused at once below their configured limits teach their own limits, not the org', async () => {
    // The service limits every token (the common case): both fill at the same time.
    const org = newOrg();
    const b = budget({ max: 10, windowMs: 60_000 }, { max: 100, windowMs: 60_000 });
    for (const t of ['ta', 'tb']) {
      const p = await sendAll(b, org, [t], 5);
      const r = await b.learn(org, t, p[4]!.permitId, 2);
      expect(r).toMatchObject({ cause: 'token', token: { learned: 4 }, org: { learned: null } });
    }
    expect((await b.peek(org, ['ta'])).org.learned).toBeUndefined();
  });

  it('with a pool of one token, a refuted token teaches the org limit at once', async () => {
    const org = newOrg();
    const b = budget({ max: 10, windowMs: tokenWindow }, { max: 100, windowMs: 60_000 });
    const p = await sendAll(b, org, ['ta'], 6);
    expect((await b.learn(org, 'ta', p[5]!.permitId, 1)).token.learned).toBe(5);
    await sleep(tokenWindow + 20);
    const [a] = await sendAll(b, org, ['ta'], 1);
    expect((await b.learn(org, 'ta', a!.permitId, 1)).org.learned).toBe(5);
  });

  it('the learned org limit applies to what this tool may spend (configured less the reserve)', async () => {
    const org = newOrg();
    const b = budget({ max: 10, windowMs: tokenWindow }, { max: 100, windowMs: 60_000 });
    await seedPolicy(redis, b.keys, org, b.options);
    await setLimits(redis, b.keys, org, { reserve: { count: 95 } }, b.options, WHO);
    const p = await sendAll(b, org, ['ta'], 5);
    // Nothing learned for the org: 4 < 5 usable, but the token is not refuted (no learned limit yet).
    expect((await b.learn(org, 'ta', p[4]!.permitId, 1)).org).toMatchObject({ limit: 5, learned: null });
  });
});

describe('limits reset forgets learned limits', () => {
  it('forgets a refuted token too (learn.lua writes refuted:<id>), which alone is no stored policy', async () => {
    const org = newOrg();
    const tokenWindow = 600;
    const b = budget({ max: 10, windowMs: tokenWindow }, { max: 100, windowMs: 60_000 });
    const p = await sendAll(b, org, ['ta'], 6);
    expect((await b.learn(org, 'ta', p[5]!.permitId, 2)).token.learned).toBe(5);
    await sleep(tokenWindow + 20);
    const [a] = await sendAll(b, org, ['ta'], 1);
    expect((await b.learn(org, 'ta', a!.permitId, 2)).cause).toBe('org');
    expect(Object.keys(await hash(org, b))).toContain('refuted:ta');
    // Learned limits, 429 counts and refuted marks are what the service taught, not a policy someone stored.
    expect((await readPolicy(redis, b.keys, org)).stored).toBe(false);
    await resetLimits(redis, b.keys, org, b.options, WHO);
    expect(Object.keys(await hash(org, b)).filter((f) => /^(learned|refuted):/.test(f))).toEqual([]);
  });

  it('keeps the 429 counts and logs what it forgot', async () => {
    const org = newOrg();
    const b = budget({ max: 5, windowMs: 60_000 }, { max: 100, windowMs: 60_000 });
    await seedPolicy(redis, b.keys, org, b.options);
    const p = await sendAll(b, org, ['t1'], 5);
    await b.learn(org, 't1', p[3]!.permitId, 1);
    const r = await resetLimits(redis, b.keys, org, b.options, WHO);
    expect(r.before.learned.tokens.t1?.max).toBe(3);
    expect(r.after.learned.tokens).toEqual({});
    expect(r.after.rateLimited).toEqual({ t1: 1 });
    const [entry] = await readChanges(redis, b.keys, { org });
    expect(entry?.details).toMatchObject({ before: { learned: { t1: 3 } } });
    expect((entry?.details.after as Record<string, unknown>).learned).toBeUndefined();
    expect((await b.peek(org, ['t1'])).tokens[0]).toMatchObject({ limit: 5, rateLimited: 1 });
  });
});
