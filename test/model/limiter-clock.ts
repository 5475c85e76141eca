// A stepped clock for the limiter's own scripts. Production reads Redis TIME in one place,
// src/limiter/includes/clock.lua; here the same spliced scripts are loaded with that part replaced by one
// that reads the time from the last ARGV, which only this helper passes. Nothing in src/ changes: the
// scripts keep their keys (a clock ARGV, not a key, so `--- @keys` stays exact on Redis Cluster), and the
// stepped scripts are defined only on a client the test made, before any TransferBudget is built on it
// (the loader defines a command once per client: a client that has `ltAcquire` keeps it).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { LIMITER_SCRIPTS } from '../../src/limiter/scripts.ts';
import type { LuaScript } from '../../src/redis/scripts.ts';

/** The production clock part, as the loader splices it (its text without the trailing newline). */
export const PRODUCTION_CLOCK = readFileSync(
  join(LIMITER_SCRIPTS.dir, 'includes', 'clock.lua'),
  'utf8',
).trimEnd();

/** Same name and return values as the production part: whole ms and the µs within that ms. */
const STEPPED_CLOCK = `-- The model test's stepped clock (test/model/limiter-clock.ts): now in µs, in the last ARGV.
local function lt_now()
  local micros = tonumber(ARGV[#ARGV])
  return math.floor(micros / 1000), micros % 1000
end`;

/** The time the scripts see: set by the test, never read from the host. */
export class SteppedClock {
  #ms: number;
  #micros = 0;

  constructor(startMs: number) {
    this.#ms = startMs;
  }

  get now(): number {
    return this.#ms;
  }

  /** Moves the clock to `ms` (never back: Redis TIME on a slewed host never goes back either). */
  set(ms: number): void {
    if (ms < this.#ms) throw new Error(`the stepped clock goes forward only: ${this.#ms} -> ${ms}`);
    if (ms > this.#ms) this.#micros = 0;
    this.#ms = ms;
  }

  /**
   * The clock ARGV of one script call: successive calls within one ms see the µs advance, as on a real
   * Redis, so permit ids of one ms are ordered (learn.lua orders them by it).
   */
  next(): string {
    const micros = this.#micros;
    this.#micros = Math.min(999, this.#micros + 1);
    return String(this.#ms * 1000 + micros);
  }

  /** The µs part the last call was given. */
  get lastMicros(): number {
    return Math.max(0, this.#micros - 1);
  }
}

export interface SteppedScript {
  production: LuaScript;
  lua: string;
}

/** The limiter's scripts that read the clock, each with the stepped part in place of the production one. */
export function steppedScripts(): SteppedScript[] {
  const out: SteppedScript[] = [];
  for (const s of LIMITER_SCRIPTS.all) {
    if (!s.includes.includes('clock')) continue;
    const pieces = s.lua.split(PRODUCTION_CLOCK);
    if (pieces.length !== 2) throw new Error(`${s.name}: the clock part is not spliced exactly once`);
    out.push({ production: s, lua: pieces.join(STEPPED_CLOCK) });
  }
  return out;
}

/**
 * Defines the stepped scripts on `client` under the production command names (`ltAcquire`, ...), each
 * call given the clock's time as one more ARGV. Call before any TransferBudget uses the client.
 */
export function installSteppedClock(client: Redis, clock: SteppedClock): SteppedScript[] {
  const scripts = steppedScripts();
  const target = client as unknown as Record<string, unknown>;
  for (const { production: s, lua } of scripts) {
    if (s.command in client) throw new Error(`${s.command} is already defined on this client`);
    const stepped = `${s.command}Stepped`;
    client.defineCommand(stepped, {
      lua,
      readOnly: s.readOnly,
      ...(s.variadic ? {} : { numberOfKeys: s.keys }),
    });
    const run = target[stepped] as (...args: unknown[]) => Promise<unknown>;
    // The loader calls it as it calls any command: (keys..., args...), with the key count first when
    // the script's key count varies; the clock goes last, after every ARGV the script reads.
    target[s.command] = (...args: unknown[]) => run.call(client, ...args, clock.next());
  }
  return scripts;
}
