// What bench/orgs.ts reads about one `work` process: its Redis connections and the commands Redis
// processed (on a redis-server of the bench's own, so no other client is counted), and its CPU time and
// resident memory from /proc (Linux only).
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';

/** Clock ticks per second of /proc/<pid>/stat times (100 on nearly every Linux). */
export const CLOCK_TICKS = (() => {
  const out = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' });
  const n = Number(out.stdout?.trim());
  return Number.isSafeInteger(n) && n > 0 ? n : 100;
})();

export interface ProcSample {
  /** utime + stime in seconds. */
  cpuS: number;
  rssKb: number;
}

/** CPU time and RSS of a process, or undefined when it is gone. */
export function procSample(pid: number): ProcSample | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: count fields after its closing one.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields 14 and 15 of the man page (utime, stime) are 11 and 12 after the name.
    const ticks = Number(fields[11]) + Number(fields[12]);
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const rssKb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN);
    return { cpuS: ticks / CLOCK_TICKS, rssKb };
  } catch {
    return undefined;
  }
}

export interface Clients {
  /** Connections other than the bench's own. */
  count: number;
  /** The same, by client name up to its first ':' (BullMQ names its connections prefix:queue). */
  byName: Record<string, number>;
}

/** CLIENT LIST without the connections named `ownName` (the bench's). */
export async function clientsOtherThan(redis: Redis, ownName: string): Promise<Clients> {
  const list = (await redis.client('LIST')) as string;
  const byName: Record<string, number> = {};
  let count = 0;
  for (const line of list.split('\n')) {
    if (!line.trim()) continue;
    const name = /(?:^| )name=(\S*)/.exec(line)?.[1] ?? '';
    if (name === ownName) continue;
    count++;
    const kind = name === '' ? '(no name)' : (name.split(':')[0] ?? name);
    byName[kind] = (byName[kind] ?? 0) + 1;
  }
  return { count, byName };
}

function infoField(info: string, field: string): number {
  return Number(new RegExp(`^${field}:(\\d+)`, 'm').exec(info)?.[1] ?? NaN);
}

export async function commandsProcessed(redis: Redis): Promise<number> {
  return infoField(await redis.info('stats'), 'total_commands_processed');
}

export async function rejectedConnections(redis: Redis): Promise<number> {
  return infoField(await redis.info('stats'), 'rejected_connections');
}

/**
 * What one reading of commandsProcessed adds to the next one (its own INFO), measured on the server
 * before anything else connects: subtracted from every idle window.
 */
export async function readingCost(redis: Redis): Promise<number> {
  const a = await commandsProcessed(redis);
  const b = await commandsProcessed(redis);
  return b - a;
}

export interface CommandCounts {
  /** total_commands_processed. */
  total: number;
  /** Calls per command (cmdstat_<name>, subcommands as Redis names them: `client|list`). */
  calls: Record<string, number>;
}

/** The counts in the text of INFO stats and commandstats. */
export function parseCommandCounts(info: string): CommandCounts {
  const calls: Record<string, number> = {};
  for (const m of info.matchAll(/^cmdstat_(\S+?):calls=(\d+)/gm)) calls[m[1] as string] = Number(m[2]);
  return { total: infoField(info, 'total_commands_processed'), calls };
}

/** INFO stats and commandstats in one command (Redis 7 takes several sections): as commandsProcessed, one. */
export async function commandCounts(redis: Redis): Promise<CommandCounts> {
  return parseCommandCounts((await redis.call('INFO', 'stats', 'commandstats')) as string);
}

/** The commands called between two readings, most called first, `own` calls of INFO (the bench's) left out. */
export function commandsBetween(a: CommandCounts, b: CommandCounts, own: number): Record<string, number> {
  const out: Array<[string, number]> = [];
  for (const [name, n] of Object.entries(b.calls)) {
    const d = n - (a.calls[name] ?? 0) - (name === 'info' ? own : 0);
    if (d > 0) out.push([name, d]);
  }
  return Object.fromEntries(out.sort((x, y) => y[1] - x[1]));
}
