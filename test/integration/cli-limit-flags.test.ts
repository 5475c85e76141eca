// The flags of `limits set` take their rules from limiter/kinds.ts, which the command table loads (it
// loads no library): a bad value is a usage error in commander's own words, said before anything
// connects; a good one reaches the limits as parsed. --reserve stands for them all.
import { afterAll, describe, expect, it } from 'vitest';
import { runCommand } from '../helpers/cli.ts';
import { deletePrefix, newRedis, randomPrefix, REDIS_URL } from '../helpers/redis.ts';

const prefix = randomPrefix('late');
const env = { REDIS_URL, QUEUE_PREFIX: prefix, LEARNER_API_TOKENS: 'acme:late-flags-token-1' };

afterAll(async () => {
  const redis = newRedis();
  await deletePrefix(redis, prefix);
  await redis.quit();
});

describe('a flag of limits set', () => {
  it('refuses a bad --reserve as commander refuses a bad flag, before connecting', async () => {
    // Nothing listens on port 1: a command that connected would fail on Redis, not on its flag.
    const r = await runCommand(['limits', 'set', '--org', 'acme', '--reserve', '30x'], {
      ...env,
      REDIS_URL: 'redis://127.0.0.1:1',
    });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      "error: option '--reserve <N|P%>' argument '30x' is invalid. --reserve expects a number of permits " +
        "(like 200) or a share of the organization's limit (like 20%), got '30x'\n(run with --help for usage)\n",
    );
    expect(r.stdout).toBe('');
  });

  it('hands a good --reserve to the command parsed', async () => {
    const set = await runCommand(['limits', 'set', '--org', 'acme', '--reserve', '20%'], env);
    expect(set.code, set.stderr).toBe(0);
    expect(set.stdout).toContain('reserveShare - -> 20%');
    const show = await runCommand(['limits', 'show', '--org', 'acme', '--json'], env);
    const orgs = (JSON.parse(show.stdout) as { orgs: { reserveShare?: string }[] }).orgs;
    expect(orgs[0]?.reserveShare).toBe('20%');
  });
});
