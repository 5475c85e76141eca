// The error budget's rules, on a real Redis through the limiter (judge-outcome.lua): a part-full sample
// judged from N/2, the share, not-found's own 90% rule, unexpected-result at once, per token, live
// settings (limits set --halt-at / --halt-sample, off), the state of the previous release (no halt
// fields: the defaults), and resume, which lifts the halt and clears the sample.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { clearSample, readSample, type SampleKind } from '../../src/limiter/breaker.ts';
import { readChanges } from '../../src/limiter/control-log.ts';
import { setLimits, setPaused } from '../../src/limiter/policy-control.ts';
import { TransferBudget } from '../../src/limiter/transfer-budget.ts';
import { createKeys } from '../../src/core/keys.ts';
import { closeRedis } from '../../src/redis/client.ts';
import { deletePrefix, newRedis, randomPrefix } from '../helpers/redis.ts';

const redis = newRedis();
const prefix = randomPrefix('breaker');
const keys = createKeys(prefix);
const fallback = {
  limitPerToken: { max: 100, windowMs: 3_600_000 },
  limitPerOrg: { max: 1000, windowMs: 86_400_000 },
};
let budget: TransferBudget;
let n = 0;
let org = '';

beforeAll(() => {
  budget = new TransferBudget(redis, { prefix, ...fallback, inflightTtlMs: 60_000 });
});
beforeEach(() => {
  org = `o${++n}`;
});
afterAll(async () => {
  await deletePrefix(redis, prefix);
  await closeRedis(redis);
});

async function feed(kind: SampleKind, code: string, count: number, tokenId = 'tokA') {
  const results = [];
  for (let i = 0; i < count; i++) {
    results.push(await budget.judge({ org, tokenId, kind, code, storm: null }));
  }
  return results;
}

const paused = async () => (await budget.policy(org)).paused;

describe('the organization sample', () => {
  it('halts at the 10th forbidden of the first 10 (a part-full sample, judged from N/2), once', async () => {
    const r = await feed('failure', 'forbidden', 9);
    expect(r.every((x) => x.halted === null)).toBe(true);
    expect(await paused()).toBeNull();
    const [tenth] = await feed('failure', 'forbidden', 1);
    expect(tenth?.halted).toBe('org');
    expect(tenth?.reason).toBe('10 of the last 10 calls answered 403 forbidden');
    const p = await paused();
    expect(p).toMatchObject({ who: 'breaker', reason: '10 of the last 10 calls answered 403 forbidden' });
    // Already halted: a later failure writes no second pause.
    const [again] = await feed('failure', 'forbidden', 1);
    expect(again?.halted).toBeNull();
    const changes = (await readChanges(redis, keys, { count: 50 })).filter((c) => c.org === org);
    expect(changes.map((c) => [c.who, c.action])).toEqual([['breaker', 'pause']]);
  });

  it('judges the last N only: failures spread under the share never halt', async () => {
    // 9 failures in every 20: 45% < 50%, whatever the order, for 200 outcomes.
    for (let i = 0; i < 200; i++) {
      const kind: SampleKind = i % 20 < 9 ? 'failure' : 'success';
      const [r] = await feed(kind, kind === 'failure' ? 'forbidden' : 'transferred', 1);
      if (i >= 20) expect(r?.halted).toBeNull();
    }
    expect((await readSample(redis, keys, org)).held).toBe(20);
  });

  it('names every failure code when they are mixed', async () => {
    await feed('success', 'transferred', 8);
    await feed('failure', 'forbidden', 6);
    const r = await feed('failure', 'invalid-request', 6);
    // Judged on what it holds: 8 failures of the 16 held is 50%.
    expect(r.find((x) => x.halted)?.reason).toBe(
      '8 of the last 16 calls failed (6 403 forbidden, 2 400 invalid request)',
    );
  });

  it('not-found of learners no list showed: only its own 90% rule', async () => {
    // 50% stale ids never halt ...
    for (let i = 0; i < 40; i++)
      await feed(i % 2 ? 'stale' : 'success', i % 2 ? 'not-found' : 'transferred', 1);
    expect(await paused()).toBeNull();
    // ... every id unknown (a wrong column, a wrong base address) does.
    const r = await feed('stale', 'not-found', 18);
    expect(r.find((x) => x.halted)?.reason).toBe('18 of the last 20 calls answered 404 not found');
  });

  it('unexpected-result halts at its first occurrence', async () => {
    await feed('success', 'transferred', 15);
    const [r] = await feed('at-once', 'unexpected-result', 1);
    expect(r?.halted).toBe('org');
    expect(r?.reason).toMatch(/^1 call answered a 200 that was not this learner's completed transfer/);
  });

  it('a token whose own sample fails is paused; the organization goes on', async () => {
    for (let i = 0; i < 30; i++) {
      await feed('success', 'transferred', 2, i % 2 ? 'tokB' : 'tokC');
      const [r] = await feed('failure', 'forbidden', 1, 'tokA');
      if (r?.halted) {
        expect(r.halted).toBe('token');
        break;
      }
    }
    const policy = await budget.policy(org);
    expect(policy.paused).toBeNull();
    expect(policy.pausedTokens.tokA).toMatchObject({
      who: 'breaker',
      reason: '10 of the last 10 calls answered 403 forbidden',
    });
    expect(Object.keys(policy.pausedTokens)).toEqual(['tokA']);
  });
});

describe('settings, the previous release, resume', () => {
  it('limits set --halt-at / --halt-sample apply at the next outcome; off never halts', async () => {
    await setLimits(redis, keys, org, { haltAt: 'off' }, fallback, 'test');
    await feed('failure', 'forbidden', 30);
    await feed('at-once', 'unexpected-result', 1);
    expect(await paused()).toBeNull();
    await setLimits(redis, keys, org, { haltAt: 80, haltSample: 10 }, fallback, 'test');
    expect((await budget.policy(org)).haltAt).toBe(80);
    await clearSample(redis, keys, org, null);
    await feed('success', 'transferred', 3);
    const r = await feed('failure', 'forbidden', 8);
    // A sample of 10: 8 failures of 10 held is 80%.
    expect(r.findIndex((x) => x.halted === 'org')).toBe(7);
    expect(r[7]?.reason).toBe('8 of the last 10 calls answered 403 forbidden');
  });

  it('an organization of the previous release (a policy without halt fields) uses the defaults', async () => {
    // The hash as the previous release wrote it: limits, no halt field.
    await redis.hset(keys.policy(org), { org: '1000/86400000', token: '100/3600000' });
    const p = await budget.policy(org);
    expect([p.haltAt, p.haltSample]).toEqual([null, null]);
    const r = await feed('failure', 'server-error', 10);
    expect(r.map((x) => x.halted)).toEqual([...Array<null>(9).fill(null), 'org']);
  });

  it('resume lifts the halt, clears the sample and is logged with its author', async () => {
    await feed('failure', 'forbidden', 10);
    expect((await paused())?.who).toBe('breaker');
    await setPaused(redis, keys, org, null, false, 'cli:alice@host');
    expect(await paused()).toBeNull();
    expect((await readSample(redis, keys, org)).held).toBe(0);
    const resume = (await readChanges(redis, keys, { count: 100 })).find(
      (c) => c.org === org && c.action === 'resume',
    );
    expect(resume?.who).toBe('cli:alice@host');
    expect(JSON.stringify(resume?.details)).toContain('10 of the last 10 calls answered 403 forbidden');
    // Afresh: nine more failures do not halt again.
    await feed('failure', 'forbidden', 9);
    expect(await paused()).toBeNull();
  });
});

describe('the 5xx storm', () => {
  it('is set while most answers are server errors, and cleared by any other answer', async () => {
    const s = (storm: 'server-error' | 'success' | 'other') =>
      budget.judge({ org, tokenId: 'tokA', kind: null, code: storm, storm });
    for (let i = 0; i < 9; i++) expect((await s('server-error')).storm).toBe(false);
    expect((await s('server-error')).storm).toBe(true);
    // Any answer that is not a server error ends it: a 4xx (the service answers again) as a success does.
    expect((await s('other')).storm).toBe(false);
    for (let i = 0; i < 10; i++) await s('server-error');
    expect((await readSample(redis, keys, org)).storm).toBe(true);
    expect((await s('success')).storm).toBe(false);
    expect((await readSample(redis, keys, org)).storm).toBe(false);
  });
});
