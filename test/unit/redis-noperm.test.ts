// Redis's words for an ACL refusal, as each version and path puts them, and the one sentence they become.
import { describe, expect, it } from 'vitest';
import { permissionDenial, permissionSentence, redisUser } from '../../src/redis/permission-denial.ts';
import { standaloneTarget } from '../../src/core/redis-target.ts';

const err = (message: string, extra: object = {}) => Object.assign(new Error(message), extra);

describe('permissionDenial', () => {
  it.each([
    ["NOPERM this user has no permissions to run the 'info' command", { kind: 'command', command: 'info' }],
    [
      "NOPERM User lt has no permissions to run the 'CLUSTER|SLOTS' command",
      { kind: 'command', command: 'cluster|slots' },
    ],
    ['NOPERM this user has no permissions to access one of the keys used as arguments', { kind: 'keys' }],
    ['NOPERM No permissions to access a key', { kind: 'keys' }],
    [
      'NOPERM this user has no permissions to access one of the channels used as arguments',
      { kind: 'channels' },
    ],
    [
      "ERR The user executing the script can't publish to the channel mentioned in the command script: 3a55, on @user_script:70.",
      { kind: 'channels' },
    ],
    [
      "ERR The user executing the script can't access at least one of the keys mentioned in the command arguments script: e186, on @user_script:1.",
      { kind: 'keys' },
    ],
    [
      "ERR The user executing the script can't run this command or subcommand script: 2267, on @user_script:1.",
      { kind: 'command', command: undefined },
    ],
  ])('%s', (message, denial) => {
    expect(permissionDenial(err(message))).toEqual(denial);
  });

  it('finds a refusal inside a cluster error and a refused MULTI, and nothing in other errors', () => {
    const node = err("NOPERM this user has no permissions to run the 'cluster|slots' command");
    expect(permissionDenial(err('Failed to refresh slots cache.', { lastNodeError: node }))).toEqual({
      kind: 'command',
      command: 'cluster|slots',
    });
    const queued = err('NOPERM this user has no permissions to access one of the keys used as arguments');
    expect(permissionDenial(err('EXECABORT Transaction discarded', { previousErrors: [queued] }))).toEqual({
      kind: 'keys',
    });
    for (const other of ['OOM command not allowed', 'READONLY', 'WRONGPASS invalid username-password pair'])
      expect(permissionDenial(err(other))).toBeUndefined();
  });
});

describe('permissionSentence', () => {
  it('names each missing rule and the ACL SETUSER that grants them', () => {
    expect(permissionSentence('lt', [{ kind: 'command', command: 'info' }], 'ltx')).toBe(
      "Redis user 'lt' may not run 'info' (NOPERM): grant it with ACL SETUSER lt +info; the tool needs the rules in docs/redis-acl.md",
    );
    expect(
      permissionSentence(
        'lt',
        [{ kind: 'command', command: 'time' }, { kind: 'keys' }, { kind: 'channels' }],
        'p1',
        '10.0.0.2:7000',
      ),
    ).toBe(
      "Redis user 'lt' may not run 'time', use the keys 'p1:*' or publish to the channels 'p1:*' on 10.0.0.2:7000 " +
        '(NOPERM): grant them with ACL SETUSER lt +time ~p1:* &p1:*; the tool needs the rules in docs/redis-acl.md',
    );
  });

  it('names the user of the URL, else REDIS_USERNAME, else default', () => {
    expect(redisUser(standaloneTarget('redis://lt%40ops:pw@h:6379'))).toBe('lt@ops');
    expect(redisUser({ ...standaloneTarget('redis://:pw@h:6379'), username: 'worker' })).toBe('worker');
    expect(redisUser(standaloneTarget('redis://h:6379'))).toBe('default');
  });
});
