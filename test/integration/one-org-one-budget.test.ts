// One organization, one budget: two org keys may not name one numeric organization (each
// would spend its daily budget), and a token is bound in Redis to one org key (a token under two keys
// would have two hourly windows). Through the functions and through the CLI, on the shared Redis.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../src/cli/shared.ts';
import { tokenFingerprint } from '../../src/core/config.ts';
import { LearnerTransferError } from '../../src/core/errors.ts';
import { createKeys } from '../../src/core/keys.ts';
import { OrgIds } from '../../src/queue/org-ids.ts';
import { bindTokens, tokenBindings } from '../../src/limiter/token-orgs.ts';
import { runCommand } from '../helpers/cli.ts';
import { deletePrefix, dumpPrefix, newRedis, randomPrefix, REDIS_URL } from '../helpers/redis.ts';

const redis = newRedis();
const prefixes: string[] = [];
const dir = mkdtempSync(join(tmpdir(), 'lt-one-budget-'));
afterAll(async () => {
  for (const p of prefixes) await deletePrefix(redis, p);
  await redis.quit();
});

function fresh(): string {
  const p = randomPrefix('budget');
  prefixes.push(p);
  return p;
}

async function codeOf(p: Promise<unknown>): Promise<{ code: string; message: string }> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(LearnerTransferError);
    return { code: (err as LearnerTransferError).code, message: (err as Error).message };
  }
  throw new Error('expected a refusal');
}

describe('two org keys, one numeric organization', () => {
  it('OrgIds refuses an id another key has, naming both keys, the id and the fix; nothing is written', async () => {
    const prefix = fresh();
    const ids = new OrgIds(redis, createKeys(prefix));
    await ids.set({ acme: 1 });
    const refused = await codeOf(ids.set({ beta: 1 }));
    expect(refused.code).toBe('LT_ORG_ID_TAKEN');
    expect(refused.message).toContain(
      "organization id 1 is already the id of 'acme' in Redis, so 'beta' cannot have it too",
    );
    expect(refused.message).toContain('LEARNER_API_TOKENS');
    expect(refused.message).toContain('--org-id acme=N');
    expect(await ids.all()).toEqual({ acme: 1 });

    // Giving the same id again to its own key is fine; so is moving ids around in one go.
    await ids.set({ acme: 1 });
    await ids.set({ acme: 2, beta: 1 });
    expect(await ids.all()).toEqual({ acme: 2, beta: 1 });
    // Two new keys with one id in one call: refused as a whole.
    expect((await codeOf(ids.set({ gamma: 7, delta: 7 }))).code).toBe('LT_ORG_ID_TAKEN');
    expect(await ids.all()).toEqual({ acme: 2, beta: 1 });

    // check() (dry runs) refuses the same and writes nothing.
    expect((await codeOf(ids.check({ gamma: 2 }))).message).toContain("'acme'");
    await ids.check({ gamma: 3 });
    expect(await ids.all()).toEqual({ acme: 2, beta: 1 });
    // resolve() with a dry run only checks; without, it remembers.
    expect((await codeOf(ids.resolve('gamma', 1, '--target-org-id N', true))).code).toBe('LT_ORG_ID_TAKEN');
    expect(await ids.resolve('gamma', 3, '--target-org-id N', true)).toBe(3);
    expect((await ids.all()).gamma).toBeUndefined();
    expect(await ids.resolve('gamma', 3, '--target-org-id N')).toBe(3);
    expect((await ids.all()).gamma).toBe(3);
  });

  it('an id two keys share from before the check is refused when it is used', async () => {
    const prefix = fresh();
    const keys = createKeys(prefix);
    await redis.hset(keys.orgIds(), { acme: '4', beta: '4' });
    const refused = await codeOf(new OrgIds(redis, keys).resolve('acme', undefined, '--target-org-id N'));
    expect(refused.code).toBe('LT_ORG_ID_TAKEN');
    expect(refused.message).toContain("'beta'");
  });

  it('the CLI: reconcile and crawl refuse it with exit 2 before reading anything', async () => {
    const prefix = fresh();
    const desired = join(dir, 'desired.csv');
    writeFileSync(desired, 'learnerId,org\n2,acme\n3,beta\n');
    const env = {
      REDIS_URL,
      QUEUE_PREFIX: prefix,
      LEARNER_API_BASE_URL: 'http://127.0.0.1:9',
      LEARNER_API_TOKENS: 'acme:org-ids-tok-1,beta:org-ids-tok-2',
    };
    const both = await runCommand(
      ['reconcile', '--desired', desired, '--org-id', 'acme=1', '--org-id', 'beta=1', '--quiet'],
      env,
    );
    expect(both.code, both.stderr).toBe(EXIT.usage);
    expect(both.stderr).toMatch(/organization id 1 is already the id of '(acme|beta)' in Redis/);
    expect(await redis.hgetall(createKeys(prefix).orgIds())).toEqual({});

    // A dry run remembers no id (it goes on to read the list, which is not there: no matter).
    const dry = await runCommand(
      ['reconcile', '--desired', desired, '--org-id', 'acme=1', '--dry-run', '--quiet'],
      env,
    );
    expect(dry.stderr).not.toContain('already the id');
    expect(await redis.hgetall(createKeys(prefix).orgIds())).toEqual({});
    await new OrgIds(redis, createKeys(prefix)).set({ acme: 1 });
    const crawl = await runCommand(['crawl', '--org', 'beta', '--target-org-id', '1', '--quiet'], env);
    expect(crawl.code, crawl.stderr).toBe(EXIT.usage);
    expect(crawl.stderr).toContain(
      "learner-transfer: organization id 1 is already the id of 'acme' in Redis, so 'beta' cannot have it too",
    );
    expect(await redis.hgetall(createKeys(prefix).orgIds())).toEqual({ acme: '1' });
  });
});

describe('one token, one organization', () => {
  it('bindTokens binds on first use, refuses another key, and a dry run writes nothing', async () => {
    const prefix = fresh();
    const a = { id: tokenFingerprint('bind-tok-a'), org: 'acme' };
    const b = { id: tokenFingerprint('bind-tok-b'), org: 'acme' };
    await bindTokens(redis, prefix, [a, b]);
    await bindTokens(redis, prefix, [a, b]); // again: the same, fine
    expect(await tokenBindings(redis, prefix)).toEqual({ [a.id]: 'acme', [b.id]: 'acme' });

    const refused = await codeOf(bindTokens(redis, prefix, [{ ...b, org: 'beta' }]));
    expect(refused.code).toBe('LT_TOKEN_BOUND');
    expect(refused.message).toBe(
      `token ${b.id} is bound to organization 'acme' in Redis but LEARNER_API_TOKENS gives it to 'beta': ` +
        'one token, one organization (its hourly budget is per token). Fix LEARNER_API_TOKENS, or, if the ' +
        `token now belongs to 'beta', run 'learner-transfer tokens rebind --token ${b.id} --org beta'.`,
    );
    // The dry run checks too...
    expect((await codeOf(bindTokens(redis, prefix, [{ ...a, org: 'beta' }], { dryRun: true }))).code).toBe(
      'LT_TOKEN_BOUND',
    );
    // ...and binds nothing new.
    const c = { id: tokenFingerprint('bind-tok-c'), org: 'gamma' };
    await bindTokens(redis, prefix, [c], { dryRun: true });
    expect(await redis.hexists(createKeys(prefix).tokenOrgs(), c.id)).toBe(0);
  });

  it('the CLI: work refuses to start (exit 3) with a token bound elsewhere; tokens rebind moves it', async () => {
    const prefix = fresh();
    const secret = 'bound-tok-secret-1';
    const id = tokenFingerprint(secret);
    const base = { REDIS_URL, QUEUE_PREFIX: prefix, LEARNER_API_BASE_URL: 'http://127.0.0.1:9' };
    const first = await runCommand(['work', '--until-idle'], {
      ...base,
      LEARNER_API_TOKENS: `acme:${secret}`,
    });
    expect(first.code, first.stderr).toBe(EXIT.ok);
    expect(await tokenBindings(redis, prefix)).toEqual({ [id]: 'acme' });

    // The same token given to another organization key, on another host say.
    const env = { ...base, LEARNER_API_TOKENS: `beta:${secret}` };
    const refused = await runCommand(['work', '--until-idle'], env);
    expect(refused.code, refused.stderr).toBe(EXIT.config);
    expect(refused.stderr).toContain(
      `learner-transfer: token ${id} is bound to organization 'acme' in Redis but LEARNER_API_TOKENS gives it to 'beta'`,
    );
    expect(refused.stderr).toContain(`learner-transfer tokens rebind --token ${id} --org beta`);
    expect(refused.stderr).not.toContain('workers started');
    expect(refused.stderr).not.toContain(secret);

    // The other commands that call the API refuse it too, dry runs included.
    const desired = join(dir, 'desired-tokens.csv');
    writeFileSync(desired, 'learnerId,org\n2,beta\n');
    const reconcile = await runCommand(
      ['reconcile', '--desired', desired, '--org-id', 'beta=2', '--dry-run', '--quiet'],
      env,
    );
    expect(reconcile.code, reconcile.stderr).toBe(EXIT.config);
    expect(reconcile.stderr).toContain(`token ${id} is bound to organization 'acme'`);
    const crawl = await runCommand(['crawl', '--org', 'beta', '--target-org-id', '2', '--quiet'], env);
    expect(crawl.code, crawl.stderr).toBe(EXIT.config);

    const badId = await runCommand(['tokens', 'rebind', '--token', 'not-an-id', '--org', 'beta'], env);
    expect(badId.code).toBe(EXIT.usage);
    expect(badId.stderr).toContain(
      "--token expects a token id of 12 hex digits (see tokens list), got 'not-an-id'",
    );

    const rebind = await runCommand(['tokens', 'rebind', '--token', id, '--org', 'beta'], env);
    expect(rebind.code, rebind.stderr).toBe(EXIT.ok);
    expect(rebind.stdout).toContain(`token ${id} is bound to 'beta' (it was bound to 'acme')`);
    expect(rebind.stdout).toContain("does not count under 'beta'");
    expect(await tokenBindings(redis, prefix)).toEqual({ [id]: 'beta' });

    const after = await runCommand(['work', '--until-idle'], env);
    expect(after.code, after.stderr).toBe(EXIT.ok);
    // The binding names the token by its fingerprint only.
    expect((await dumpPrefix(redis, prefix)).join('\n')).not.toContain(secret);
  });
});
