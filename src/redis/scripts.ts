// The one Lua loader: every script is read, its includes spliced, its keys declared and
// checked, the same way (docs/architecture.md, "Lua": naming, `--- @include`, `--- @keys N` /
// `N+`).
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ChainableCommander, Redis } from 'ioredis';
import { LearnerTransferError } from '../core/errors.ts';
import type { RedisClient } from './client.ts';

export type ScriptArg = string | number;

export interface LuaScript {
  /** The file name without `.lua`: `finish-attempt`. */
  readonly name: string;
  /** The ioredis command: `ltFinishAttempt`. */
  readonly command: string;
  readonly file: string;
  /** The text Redis runs: the file with its includes spliced in. */
  readonly lua: string;
  /** SHA-1 of `lua`, the one EVALSHA sends. */
  readonly sha: string;
  /** Exactly this many keys, or at least this many when `variadic`. */
  readonly keys: number;
  readonly variadic: boolean;
  /** `#!lua flags=no-writes`: Redis refuses any write, so ioredis may send it as a read. */
  readonly readOnly: boolean;
  /** The parts spliced in, in order (nested ones included). */
  readonly includes: readonly string[];
}

const NAME_RE = /^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$/;
const TAG_RE = /^---\s*@(\S+)(?:\s+(.*?))?\s*$/;
const KEYS_RE = /^(\d+)(\+)?$/;
const INCLUDE_RE = /^"([^"]+)"$/;

/** `finish-attempt` -> `ltFinishAttempt`. */
export function commandName(name: string): string {
  return `lt${name
    .split('-')
    .map((w) => w.charAt(0).toUpperCase() + w.slice(1))
    .join('')}`;
}

/** Which file each command name came from: two folders' scripts of one name would clash. */
const OWNERS = new Map<string, string>();

interface Splice {
  /** The command the parts are spliced into (its file), for the messages. */
  root: string;
  done: Set<string>;
  /** Parts being spliced, outermost first: one met again is a loop. */
  stack: string[];
  order: string[];
  keys?: { count: number; variadic: boolean };
}

function splice(dir: string, file: string, text: string, state: Splice, part: boolean): string {
  const out: string[] = [];
  for (const line of text.split('\n')) {
    const tag = TAG_RE.exec(line);
    if (!tag) {
      out.push(line);
      continue;
    }
    const [, kind, value = ''] = tag;
    if (kind === 'keys') {
      if (part)
        throw new LearnerTransferError(
          'LT_INTERNAL',
          `${file}: an include declares no key count (--- @keys is the command's)`,
        );
      const m = KEYS_RE.exec(value);
      if (!m)
        throw new LearnerTransferError(
          'LT_INTERNAL',
          `${file}: expected --- @keys N or --- @keys N+, got '${line.trim()}'`,
        );
      if (state.keys) throw new LearnerTransferError('LT_INTERNAL', `${file}: declares its key count twice`);
      state.keys = { count: Number(m[1]), variadic: m[2] === '+' };
      out.push(line);
    } else if (kind === 'include') {
      const name = INCLUDE_RE.exec(value)?.[1];
      if (!name || !NAME_RE.test(name)) {
        throw new LearnerTransferError(
          'LT_INTERNAL',
          `${file}: expected --- @include "<kebab-case name>", got '${line.trim()}'`,
        );
      }
      if (state.stack.includes(name)) {
        const path = [...state.stack.slice(state.stack.indexOf(name)), name].join(' -> ');
        throw new LearnerTransferError(
          'LT_INTERNAL',
          `${state.root}: include loop ${path} (in includes/ of ${dir})`,
        );
      }
      if (state.done.has(name)) continue;
      const partFile = join(dir, 'includes', `${name}.lua`);
      let partText: string;
      try {
        partText = readFileSync(partFile, 'utf8');
      } catch (err) {
        if ((err as { code?: string }).code !== 'ENOENT') throw err;
        throw new LearnerTransferError(
          'LT_INTERNAL',
          `${file}: includes "${name}", but there is no ${partFile}`,
        );
      }
      // A `#!lua` line must be a script's first line: a part spliced below the header cannot
      // carry one.
      if (partText.startsWith('#!'))
        throw new LearnerTransferError('LT_INTERNAL', `${partFile}: an include cannot have a #! line`);
      state.stack.push(name);
      const body = splice(dir, partFile, partText, state, true);
      state.stack.pop();
      state.done.add(name);
      state.order.push(name);
      out.push(body.endsWith('\n') ? body.slice(0, -1) : body);
    } else {
      throw new LearnerTransferError(
        'LT_INTERNAL',
        `${file}: unknown tag '${line.trim()}' (a script knows --- @keys and --- @include)`,
      );
    }
  }
  return out.join('\n');
}

/** Reads one command and splices its includes in; throws on anything the naming rule refuses. */
export function readScript(dir: string, name: string): LuaScript {
  const file = join(dir, `${name}.lua`);
  if (!NAME_RE.test(name))
    throw new LearnerTransferError('LT_INTERNAL', `${file}: a script's name is kebab-case, verb(-noun)`);
  const state: Splice = { root: file, done: new Set(), stack: [], order: [] };
  const lua = splice(dir, file, readFileSync(file, 'utf8'), state, false);
  if (!state.keys)
    throw new LearnerTransferError('LT_INTERNAL', `${file}: no --- @keys line after its header`);
  return {
    name,
    command: commandName(name),
    file,
    lua,
    sha: createHash('sha1').update(lua).digest('hex'),
    keys: state.keys.count,
    variadic: state.keys.variadic,
    readOnly: /^#!lua[^\n]*\bno-writes\b/.test(lua),
    includes: state.order,
  };
}

type ScriptFunction = (...args: ScriptArg[]) => unknown;

/** The scripts of one folder, defined on a client on first use. */
export class ScriptSet<Name extends string> {
  readonly dir: string;
  readonly #scripts: ReadonlyMap<Name, LuaScript>;

  constructor(dir: string, scripts: ReadonlyMap<Name, LuaScript>) {
    this.dir = dir;
    this.#scripts = scripts;
  }

  get all(): LuaScript[] {
    return [...this.#scripts.values()];
  }

  get(name: Name): LuaScript {
    const script = this.#scripts.get(name);
    if (!script) throw new LearnerTransferError('LT_INTERNAL', `no script '${name}' in ${this.dir}`);
    return script;
  }

  /**
   * Defines every command of the folder on the client, once (a client that has a command keeps
   * it). A pipeline takes the commands its client had when made: define first.
   */
  define(client: RedisClient): void {
    for (const script of this.#scripts.values()) defineOn(client, script);
  }

  /** Runs a script on the client (EVALSHA, EVAL when Redis does not have it yet). */
  run(
    client: RedisClient,
    name: Name,
    keys: readonly string[],
    args: readonly ScriptArg[],
  ): Promise<unknown> {
    const script = this.get(name);
    defineOn(client, script);
    return this.#send(client, script, keys, args) as Promise<unknown>;
  }

  /** Adds a script call to a pipeline (or MULTI) of a client the folder was defined on. */
  queue(
    pipeline: ChainableCommander,
    name: Name,
    keys: readonly string[],
    args: readonly ScriptArg[],
  ): ChainableCommander {
    const script = this.get(name);
    if (!(script.command in pipeline)) {
      throw new LearnerTransferError(
        'LT_INTERNAL',
        `${script.command} is not defined on the client this pipeline was made from`,
      );
    }
    return this.#send(pipeline, script, keys, args) as ChainableCommander;
  }

  /**
   * Sends the script with EVAL on one node, defining nothing: for a per-node check
   * (acl-check.ts).
   */
  eval(node: Redis, name: Name, keys: readonly string[], args: readonly ScriptArg[]): Promise<unknown> {
    const script = this.get(name);
    return node.eval(script.lua, keys.length, ...checkKeys(script, keys), ...args);
  }

  #send(target: object, script: LuaScript, keys: readonly string[], args: readonly ScriptArg[]): unknown {
    const fn = (target as Record<string, ScriptFunction>)[script.command] as ScriptFunction;
    const given = checkKeys(script, keys);
    return script.variadic
      ? fn.call(target, given.length, ...given, ...args)
      : fn.call(target, ...given, ...args);
  }
}

function checkKeys(script: LuaScript, keys: readonly string[]): readonly string[] {
  const ok = script.variadic ? keys.length >= script.keys : keys.length === script.keys;
  if (!ok) {
    throw new LearnerTransferError(
      'LT_INTERNAL',
      `${script.file} takes ${script.keys}${script.variadic ? ' or more' : ''} keys ` +
        `(--- @keys ${script.keys}${script.variadic ? '+' : ''}), given ${keys.length}`,
    );
  }
  return keys;
}

function defineOn(client: RedisClient, script: LuaScript): void {
  if (script.command in client) return;
  client.defineCommand(script.command, {
    lua: script.lua,
    readOnly: script.readOnly,
    ...(script.variadic ? {} : { numberOfKeys: script.keys }),
  });
}

/**
 * Reads the commands of a folder, which must be exactly `names` (a .lua file no code names is
 * refused).
 */
export function loadScripts<const Name extends string>(
  folder: string | URL,
  names: readonly Name[],
): ScriptSet<Name> {
  const dir = folder instanceof URL ? fileURLToPath(folder) : folder;
  const present = readdirSync(dir)
    .filter((f) => f.endsWith('.lua'))
    .map((f) => f.slice(0, -'.lua'.length));
  const missing = names.filter((n) => !present.includes(n));
  const unnamed = present.filter((n) => !(names as readonly string[]).includes(n));
  if (missing.length > 0)
    throw new LearnerTransferError('LT_INTERNAL', `${dir}: no ${missing.map((n) => `${n}.lua`).join(', ')}`);
  if (unnamed.length > 0) {
    throw new LearnerTransferError(
      'LT_INTERNAL',
      `${dir}: ${unnamed.map((n) => `${n}.lua`).join(', ')} not in the folder's list of scripts ` +
        `(a shared part belongs in includes/)`,
    );
  }
  const scripts = new Map<Name, LuaScript>();
  for (const name of names) {
    const script = readScript(dir, name);
    const owner = OWNERS.get(script.command);
    if (owner !== undefined && owner !== script.file) {
      throw new LearnerTransferError(
        'LT_INTERNAL',
        `${script.file} and ${owner} would both be ${script.command}: rename one`,
      );
    }
    OWNERS.set(script.command, script.file);
    scripts.set(name, script);
  }
  return new ScriptSet(dir, scripts);
}
