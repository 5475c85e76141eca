import { describe, expect, it } from 'vitest';
import { problemsOf } from '../helpers/config-problems.ts';
import { loadConfig, tokenFingerprint } from '../../src/core/config.ts';
import { parseRate, parseDuration, humanizeMs } from '../../src/core/duration.ts';

describe('config', () => {
  it('has the documented defaults', () => {
    const c = loadConfig({});
    expect(c.redis).toMatchObject({ mode: 'standalone', url: 'redis://127.0.0.1:6379' });
    expect(c.queuePrefix).toBe('ltx');
    expect(c.limitPerToken).toEqual({ max: 100, windowMs: 3_600_000 });
    expect(c.limitPerOrg).toEqual({ max: 1000, windowMs: 86_400_000 });
    expect(c.userAgent).toMatch(/learner-transfer/);
    expect(c.tokens).toEqual([]);
    expect(Object.isFrozen(c)).toBe(true);
    // Defaults are nobody's setting: no LIMIT_* and no USER_AGENT is counted as set.
    expect(c.limitVariablesSet).toEqual([]);
    expect(c.userAgentSet).toBe(false);
    const set = loadConfig({ LIMIT_PER_ORG: '1000/1d', LIMIT_BURST: '', USER_AGENT: 'Acme Corp' });
    expect(set.limitVariablesSet).toEqual(['LIMIT_PER_ORG']);
    expect(set.userAgentSet).toBe(true);
  });

  it('parses org:token pairs, groups orgs, and hides secrets from JSON', () => {
    const c = loadConfig({ LEARNER_API_TOKENS: 'acme:tok1, acme:tok2,beta:tok3' });
    expect(c.orgs).toEqual(['acme', 'beta']);
    expect(c.tokens.map((t) => t.org)).toEqual(['acme', 'acme', 'beta']);
    expect(c.tokens[0]?.secret).toBe('tok1');
    expect(c.tokens[0]?.id).toBe(tokenFingerprint('tok1'));
    expect(JSON.stringify(c)).not.toContain('tok1');
    expect(JSON.stringify(c)).not.toContain('tok3');
  });

  it('names the variable, the expected form and the bad value', () => {
    const problems = problemsOf({
      LIMIT_PER_TOKEN: '100 per hour',
      CONCURRENCY: 'lots',
      REDIS_URL: 'localhost',
    });
    expect(problems).toContain(
      "LIMIT_PER_TOKEN: expected N/DURATION like 100/1h (units ms, s, m, h, d), got '100 per hour'",
    );
    expect(problems.find((p) => p.startsWith('CONCURRENCY:'))).toMatch(
      /whole number from 1 to 1000, got 'lots'/,
    );
    expect(problems.find((p) => p.startsWith('REDIS_URL:'))).toMatch(/redis or rediss URL, got 'localhost'/);
  });

  it('never echoes a token in an error', () => {
    const problems = problemsOf({
      LEARNER_API_TOKENS: 'acme:secret-one,not a pair with secret-two,acme:secret-one',
    });
    const text = problems.join('\n');
    expect(text).toMatch(/LEARNER_API_TOKENS: entry 2 is not ORG:TOKEN/);
    expect(text).toMatch(/entry 3 \(org 'acme'\) repeats a token/);
    expect(text).not.toContain('secret-one');
    expect(text).not.toContain('secret-two');
  });

  it('REDIS_HIGH_WATER: a percentage or a ratio, 90% by default; a bad one is named with its value', () => {
    expect(loadConfig({}).redisHighWater).toBe(0.9);
    expect(loadConfig({ REDIS_HIGH_WATER: '85%' }).redisHighWater).toBeCloseTo(0.85);
    expect(loadConfig({ REDIS_HIGH_WATER: '0.8' }).redisHighWater).toBe(0.8);
    expect(loadConfig({ REDIS_HIGH_WATER: '100%' }).redisHighWater).toBe(1);
    for (const bad of ['90', '150%', '0', '0%', 'high', '1.5']) {
      expect(problemsOf({ REDIS_HIGH_WATER: bad })).toEqual([
        `REDIS_HIGH_WATER: expected a share of maxmemory like 90% or 0.9 (from 1% to 100%), got '${bad}'`,
      ]);
    }
  });

  it('requires base URL and tokens when a command needs them', () => {
    const problems = problemsOf({}, { requireBaseUrl: true, requireTokens: true });
    expect(problems.some((p) => p.startsWith('LEARNER_API_BASE_URL: required'))).toBe(true);
    expect(problems.some((p) => p.startsWith('LEARNER_API_TOKENS: required'))).toBe(true);
  });
});

describe('durations and rates', () => {
  it('parses the N/DURATION forms', () => {
    expect(parseRate('100/1h')).toEqual({ max: 100, windowMs: 3_600_000 });
    expect(parseRate('1000/1d')).toEqual({ max: 1000, windowMs: 86_400_000 });
    expect(parseRate('100/4s')).toEqual({ max: 100, windowMs: 4000 });
    expect(parseRate('5/h')).toEqual({ max: 5, windowMs: 3_600_000 });
    expect(parseRate('20/250ms')).toEqual({ max: 20, windowMs: 250 });
    for (const bad of ['0/1h', '100', '100/1y', '-1/1h', '1.5/1h', '100/0s', ''])
      expect(parseRate(bad)).toBeUndefined();
    expect(parseDuration('1.5s')).toBe(1500);
    expect(parseDuration('abc')).toBeUndefined();
    // Below half a millisecond is 0 ms: not a duration.
    expect(parseDuration('0.4ms')).toBeUndefined();
    expect(parseDuration('0.5ms')).toBe(1);
    expect(parseDuration('0')).toBeUndefined();
  });

  it('humanizes ETAs', () => {
    expect(humanizeMs(19 * 86_400_000 + 3 * 3_600_000)).toBe('19 days 3 h');
    expect(humanizeMs(12 * 60_000)).toBe('12 min');
    expect(humanizeMs(0)).toBe('now');
  });
});
