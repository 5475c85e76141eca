// `limits show` says where each limit comes from, and only what is true: stored in Redis and seeded from
// the LIMIT_* an environment set, or from built-in defaults nobody set, or (a record of an earlier release)
// from either; and where nothing is stored, this process's own LIMIT_* / HALT_* or its built-in defaults.
// Real Redis, the CLI in-process.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKeys } from '../../src/core/keys.ts';
import { runCommand } from '../helpers/cli.ts';
import { deletePrefix, newRedis, randomPrefix } from '../helpers/redis.ts';
import type { RedisClient } from '../../src/redis/client.ts';
import { closeRedis } from '../../src/redis/client.ts';

let redis: RedisClient;
const prefix = randomPrefix('limits-origin');
/** No LIMIT_* and no HALT_* but LIMIT_PER_ORG and LIMIT_BURST: every other value is a built-in default. */
const base = {
  REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
  QUEUE_PREFIX: prefix,
  LEARNER_API_TOKENS: 'acme:tok-acme-1,beta:tok-beta-1,gamma:tok-gamma-1,delta:tok-delta-1',
  LOG_LEVEL: 'warn',
};

beforeAll(() => {
  redis = newRedis();
});
afterAll(async () => {
  await deletePrefix(redis, prefix);
  await closeRedis(redis);
});

const show = async (org: string, env: Record<string, string>) => {
  const r = await runCommand(['limits', 'show', '--org', org], env);
  expect(r.code, r.stderr).toBe(0);
  return r.stdout;
};

describe('limits show: where the limits come from', () => {
  it("nothing stored: this process's own LIMIT_* and HALT_*, or the built-in defaults nobody set", async () => {
    const out = await show('acme', { ...base, LIMIT_PER_ORG: '60/4s' });
    expect(out).toContain(
      "acme: no limits stored in Redis: each process uses its own LIMIT_* (this one: LIMIT_PER_TOKEN's built-in default 100/1h, LIMIT_PER_ORG=60/4s)",
    );
    expect(out).toContain('(the built-in defaults: HALT_AT and HALT_SAMPLE are not set, none stored)');
    const halt = await show('acme', { ...base, HALT_AT: '80%' });
    expect(halt).toContain("(HALT_AT of this process, HALT_SAMPLE's built-in default: none stored)");
  });

  it('seeded from one variable set and one built-in default', async () => {
    const env = { ...base, LIMIT_PER_ORG: '60/4s' };
    expect((await runCommand(['limits', 'set', '--org', 'beta', '--reserve', '5'], env)).code).toBe(0);
    const out = await show('beta', env);
    expect(out).toContain(
      "beta: limits in Redis (seeded from LIMIT_PER_TOKEN's built-in default 100/1h and LIMIT_PER_ORG=60/4s)",
    );
    expect(out).not.toContain('LIMIT_PER_TOKEN=100/1h');
  });

  it('seeded from the built-in defaults when no LIMIT_* was set, from the variables when both were', async () => {
    expect((await runCommand(['limits', 'set', '--org', 'gamma', '--reserve', '5'], base)).code).toBe(0);
    expect(await show('gamma', base)).toContain(
      'gamma: limits in Redis (seeded from the built-in defaults, 100/1h per token and 1000/1d per organization: no LIMIT_* was set)',
    );
    const both = { ...base, LIMIT_PER_TOKEN: '20/2s', LIMIT_PER_ORG: '60/4s' };
    expect((await runCommand(['limits', 'reset', '--org', 'gamma'], both)).code).toBe(0);
    expect(await show('gamma', both)).toContain(
      'gamma: limits in Redis (seeded from LIMIT_PER_TOKEN=20/2s and LIMIT_PER_ORG=60/4s)',
    );
  });

  it('a record of an earlier release, which did not say what was set, is not said to be LIMIT_*', async () => {
    // The policy hash as the previous release seeded it.
    await redis.hset(createKeys(prefix).policy('delta'), {
      org: '50/1000',
      token: '6/1000',
      seededFrom: JSON.stringify({ LIMIT_PER_TOKEN: '6/1s', LIMIT_PER_ORG: '50/1s' }),
    });
    expect(await show('delta', base)).toContain(
      'delta: limits in Redis (seeded with 6/1s per token and 50/1s per organization, from LIMIT_* or their built-in defaults: an earlier release did not record which)',
    );
  });

  it("status says which of this process's LIMIT_* its environment set, and which are built-in defaults", async () => {
    const one = await runCommand(['status', '--org', 'delta'], { ...base, LIMIT_PER_ORG: '60/4s' });
    expect(one.code, one.stderr).toBe(0);
    expect(one.stdout).toContain(
      "(this process: LIMIT_PER_TOKEN's built-in default 100/1h, LIMIT_PER_ORG=60/4s; workers follow",
    );
    expect(one.stdout).not.toContain('LIMIT_* of this environment');
    const both = await runCommand(['status', '--org', 'delta'], {
      ...base,
      LIMIT_PER_TOKEN: '20/2s',
      LIMIT_PER_ORG: '60/4s',
    });
    expect(both.stdout).toContain(
      '(this process: LIMIT_PER_TOKEN=20/2s, LIMIT_PER_ORG=60/4s; workers follow',
    );
  });
});
