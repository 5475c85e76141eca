// The limiter's Lua scripts, read once at startup from the .lua files beside this module and defined as
// ioredis commands (EVALSHA, with EVAL on NOSCRIPT), BullMQ style.
import { readFileSync } from 'node:fs';
import type { RedisClient } from '../redis/client.ts';

function lua(name: string): string {
  return readFileSync(new URL(`./${name}.lua`, import.meta.url), 'utf8');
}

/**
 * A script with policy-lib.lua before it, so every script that applies the organization's policy reads
 * it the same way. A `#!lua flags=...` line must stay the first line of the script.
 */
const POLICY_LIB = lua('policy-lib');
function withPolicy(name: string): string {
  const source = lua(name);
  const shebang = /^#!lua[^\n]*\n/.exec(source)?.[0] ?? '';
  return `${shebang}${POLICY_LIB}\n${source.slice(shebang.length)}`;
}

const SOURCES = {
  ltLimiterAcquire: { lua: withPolicy('acquire'), readOnly: false },
  ltLimiterSettle: { lua: lua('settle'), readOnly: false },
  ltLimiterRelease: { lua: lua('release'), readOnly: false },
  ltLimiterBlock: { lua: lua('block'), readOnly: false },
  ltLimiterLearn: { lua: withPolicy('learn'), readOnly: false },
  ltLimiterPeek: { lua: withPolicy('peek'), readOnly: true },
  ltLimiterPolicyChange: { lua: lua('policy-change'), readOnly: false },
} as const;

type Arg = string | number;
/** Each command takes the number of keys first, then the keys, then ARGV. */
type ScriptCommand = (numKeys: number, ...args: Arg[]) => Promise<unknown>;
export type LimiterCommands = Record<keyof typeof SOURCES, ScriptCommand>;

/** Defines the commands on the client (idempotent) and returns it typed with them. */
export function defineLimiterCommands(redis: RedisClient): LimiterCommands {
  for (const [name, source] of Object.entries(SOURCES)) {
    if (!(name in redis)) redis.defineCommand(name, source);
  }
  return redis as unknown as LimiterCommands;
}

/** Calls a script with its keys and arguments. */
export function run(commands: LimiterCommands, name: keyof LimiterCommands, keys: string[], args: Arg[]) {
  const command = commands[name];
  return command.call(commands, keys.length, ...keys, ...args);
}
