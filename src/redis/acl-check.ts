// What the tool needs of a Redis ACL user, checked at the start of every command, so a missing
// rule stops it with one sentence (exit 7). Redis answers through redis.acl_check_cmd in
// check-acl.lua (docs/redis-acl.md).
import type { Redis } from 'ioredis';
import { createKeys } from '../core/keys.ts';
import { isCluster, masters, type RedisClient } from './client.ts';
import type { RedisTarget } from '../core/redis-target.ts';
import { permissionDenial, permissionError, redisUser, type PermissionDenial } from './permission-denial.ts';
import { REDIS_SCRIPTS } from './lua.ts';

/** check-acl.lua, with the other script of this folder (lua.ts). */
export const ACL_CHECK_SCRIPTS = REDIS_SCRIPTS;

/** A command as the check sends it: `argv`, of which the first `name` strings name the command. */
interface Check {
  argv: string[];
  name: number;
  /** What a refusal of the arguments (the command itself allowed) means. */
  args?: 'keys' | 'channels';
}

/**
 * The commands the tool sends on a key (its own Lua's and BullMQ's), with the arguments after
 * the key.
 */
const KEYED: Record<string, string[]> = {
  // read
  exists: [],
  get: [],
  type: [],
  pttl: [],
  hexists: ['f'],
  hget: ['f'],
  hgetall: [],
  hlen: [],
  hmget: ['f'],
  hscan: ['0'],
  lindex: ['0'],
  llen: [],
  lpos: ['x'],
  lrange: ['0', '1'],
  scard: [],
  sismember: ['x'],
  smembers: [],
  smismember: ['x'],
  xlen: [],
  xrange: ['-', '+'],
  xrevrange: ['+', '-'],
  zcard: [],
  zcount: ['0', '1'],
  zlexcount: ['-', '+'],
  zmscore: ['x'],
  zrange: ['0', '1'],
  zrangebylex: ['-', '+'],
  zrangebyscore: ['0', '1'],
  zrevrange: ['0', '1'],
  zrevrangebyscore: ['1', '0'],
  zscore: ['x'],
  // write
  bzpopmin: ['0'],
  del: [],
  expire: ['1'],
  hdel: ['f'],
  hincrby: ['f', '1'],
  hmset: ['f', 'v'],
  hset: ['f', 'v'],
  hsetnx: ['f', 'v'],
  incr: [],
  incrby: ['1'],
  lpop: [],
  lpush: ['x'],
  lrem: ['0', 'x'],
  lset: ['0', 'x'],
  ltrim: ['0', '1'],
  pexpire: ['1'],
  pexpireat: ['1'],
  rpop: [],
  rpush: ['x'],
  sadd: ['x'],
  set: ['v'],
  srem: ['x'],
  unlink: [],
  xadd: ['*', 'f', 'v'],
  xdel: ['0-1'],
  xtrim: ['MAXLEN', '1'],
  zadd: ['1', 'x'],
  zpopmin: [],
  zrem: ['x'],
  zremrangebyrank: ['0', '1'],
  zremrangebyscore: ['0', '1'],
};

/** Every check, for the keys and the events channel of `org` under `prefix`. */
export function neededChecks(prefix: string, org: string, cluster: boolean): Check[] {
  const keys = createKeys(prefix);
  const queueKey = keys.queueKey(keys.queueName(org), 'wait');
  // One key of each family: a key rule narrower than PREFIX:* fails on one of them.
  const everyKind = [
    queueKey,
    keys.outcomes(org),
    keys.claims(),
    keys.runs(),
    keys.queueKey(keys.controlQueueName(), 'wait'),
  ];
  const checks: Check[] = [
    ...['ping', 'info', 'time', 'multi', 'exec', 'scan 0', 'wait 0 0'].map((c) => ({
      argv: c.split(' '),
      name: 1,
    })),
    // ioredis and BullMQ name their connections.
    { argv: ['client', 'setname', 'learner-transfer'], name: 2 },
    // The Lua loader: EVALSHA, and EVAL when Redis does not have the script yet.
    { argv: ['evalsha', '0'.repeat(40), String(everyKind.length), ...everyKind], name: 1, args: 'keys' },
    { argv: ['eval', 'return 1', String(everyKind.length), ...everyKind], name: 1, args: 'keys' },
    { argv: ['rpoplpush', queueKey, `${queueKey}:x`], name: 1, args: 'keys' },
    { argv: ['rename', queueKey, `${queueKey}:x`], name: 1, args: 'keys' },
    ...Object.entries(KEYED).map(([command, rest]) => ({
      argv: [command, queueKey, ...rest],
      name: 1,
      args: 'keys' as const,
    })),
    // The limiter announces budget given back, and changed limits, on the organization's channel.
    { argv: ['publish', keys.limiterEvents(org), 'x'], name: 1, args: 'channels' },
    // Every `work` listens to the producers' nudges and the limiter's events (worker/lanes.ts).
    { argv: ['subscribe', keys.lanesChannel()], name: 1, args: 'channels' },
  ];
  // ioredis learns the slots with CLUSTER SLOTS, and waits for CLUSTER INFO to say ok.
  if (cluster) checks.push({ argv: ['cluster', 'slots'], name: 2 }, { argv: ['cluster', 'info'], name: 2 });
  return checks;
}

/**
 * Checks on each master that the ACL user may send every command the tool needs; throws
 * LT_REDIS_PERMISSION (exit 7) naming the missing rules. Other errors lead to probing.
 */
export async function checkRedisPermissions(
  redis: RedisClient,
  target: RedisTarget,
  prefix: string,
  orgs: readonly string[],
): Promise<void> {
  const checks = neededChecks(prefix, orgs[0] ?? 'acl-check', isCluster(redis));
  for (const node of masters(redis)) {
    const denials = await refusedOn(node, checks);
    if (denials.length > 0) {
      const address = `${node.options.host ?? ''}:${node.options.port ?? ''}`;
      throw permissionError(redisUser(target), denials, prefix, {
        node: isCluster(redis) ? address : undefined,
      });
    }
  }
}

async function refusedOn(node: Redis, checks: Check[]): Promise<PermissionDenial[]> {
  let reply: unknown;
  try {
    // EVAL of the text: a refusal must name EVAL, the rule the check needs.
    reply = await ACL_CHECK_SCRIPTS.eval(node, 'check-acl', [], [JSON.stringify(checks)]);
  } catch (err) {
    // EVAL itself refused: that is the rule to name (the tool's scripts need it too).
    const denial = permissionDenial(err);
    return denial ? [denial] : probe(node, checks);
  }
  const denials: PermissionDenial[] = [];
  for (const entry of Array.isArray(reply) ? (reply as unknown[]) : []) {
    const [index, commandAllowed] = entry as [number, number];
    const check = checks[index - 1];
    if (!check) continue;
    if (commandAllowed === 1 && check.args) denials.push({ kind: check.args });
    else denials.push({ kind: 'command', command: check.argv.slice(0, check.name).join('|') });
  }
  return denials;
}

/**
 * Without acl_check_cmd (Redis before 7), the commands whose refusal would hurt first, sent for
 * real; all harmless (EVALSHA of no script answers NOSCRIPT).
 */
async function probe(node: Redis, checks: Check[]): Promise<PermissionDenial[]> {
  const argvOf = (command: string) => checks.find((c) => c.argv[0] === command)?.argv.slice(1) ?? [];
  const sends: (() => Promise<unknown>)[] = [
    () => node.info('server'),
    () => node.time(),
    () => node.call('evalsha', ...argvOf('evalsha')),
    () => node.call('publish', argvOf('publish')[0] ?? '', ''),
  ];
  const denials: PermissionDenial[] = [];
  for (const send of sends) {
    await send().catch((err: unknown) => {
      const denial = permissionDenial(err);
      if (denial) denials.push(denial);
    });
  }
  return denials;
}
