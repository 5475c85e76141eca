// Every Lua script of src/ through the one loader (src/redis/scripts.ts), on the real Redis: each compiles
// as the loader spliced it, its declared key count is the one its header lists and the only keys it reads
// by number, its includes are spliced once each, and an include loop, a missing include or a script
// outside the naming rule is refused. A client is given each command once, a Cluster client too.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { Cluster } from 'ioredis';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { CLAIM_SCRIPTS } from '../../src/claims/claims.ts';
import { LIMITER_SCRIPTS } from '../../src/limiter/scripts.ts';
import { OUTCOME_SCRIPTS } from '../../src/outcomes/store.ts';
import { QUEUE_SCRIPTS } from '../../src/queue/scripts.ts';
import { ACL_CHECK_SCRIPTS } from '../../src/redis/acl-check.ts';
import { AUDIT_SCRIPTS } from '../../src/ops/audit/archive.ts';
import { loadScripts, type LuaScript } from '../../src/redis/scripts.ts';
import { ROOT } from '../helpers/cli.ts';
import { deletePrefix, newRedis, randomPrefix } from '../helpers/redis.ts';

const SETS = [
  LIMITER_SCRIPTS,
  OUTCOME_SCRIPTS,
  CLAIM_SCRIPTS,
  QUEUE_SCRIPTS,
  ACL_CHECK_SCRIPTS,
  AUDIT_SCRIPTS,
];
const SCRIPTS: LuaScript[] = SETS.flatMap((s) => s.all);
const SRC = join(ROOT, 'src');

const redis = newRedis();
const prefix = randomPrefix('lua');
const fixtures = mkdtempSync(join(tmpdir(), 'lt-lua-'));

afterAll(async () => {
  rmSync(fixtures, { recursive: true, force: true });
  await deletePrefix(redis, prefix);
  await redis.quit();
});

function luaFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? luaFiles(join(dir, e.name)) : e.name.endsWith('.lua') ? [join(dir, e.name)] : [],
  );
}

/** The header block (--[[ ... ]]) a script opens with, after its #!lua line if any. */
function header(source: string): string {
  const m = /^(?:#![^\n]*\n)?--\[\[([\s\S]*?)\n\]\]/.exec(source);
  if (!m?.[1]) throw new Error('no header');
  return m[1];
}

/**
 * The keys a header lists: KEYS[3] and KEYS[1..4] by number, and the per-call ones (KEYS[5..],
 * KEYS[3i+3..3i+5], KEYS[3n+6]); `least` is the fewest keys a call can have (n = 0, an empty open range).
 */
function listedKeys(text: string): { numbered: number[]; perCall: boolean; least: number } {
  const numbered = new Set<number>();
  let perCall = false;
  let least = 0;
  for (const [, raw = ''] of text.matchAll(/KEYS\[([^\]]*)\]/g)) {
    const inner = raw.replace(/\s/g, '');
    let m: RegExpExecArray | null;
    if ((m = /^(\d+)$/.exec(inner))) numbered.add(Number(m[1]));
    else if ((m = /^(\d+)\.\.(\d+)$/.exec(inner))) {
      for (let i = Number(m[1]); i <= Number(m[2]); i++) numbered.add(i);
    } else if ((m = /^(\d+)\.\.$/.exec(inner))) {
      perCall = true;
      least = Math.max(least, Number(m[1]) - 1);
    } else if ((m = /^\d*n\+(\d+)$/.exec(inner))) {
      perCall = true;
      least = Math.max(least, Number(m[1]));
    } else if (/i/.test(inner)) perCall = true;
    else throw new Error(`KEYS[${raw}]: not a form this test reads`);
  }
  const sorted = [...numbered].sort((a, b) => a - b);
  return { numbered: sorted, perCall, least: Math.max(least, sorted.at(-1) ?? 0) };
}

/** The script without its comments (a Lua string holding `--` does not occur in ours). */
function code(lua: string): string {
  return lua.replace(/--\[\[[\s\S]*?\]\]/g, '').replace(/--[^\n]*/g, '');
}

const upTo = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

describe('the Lua scripts of src/', () => {
  it('are all loaded: every .lua file is a command of a folder, or an include one of them uses', () => {
    const commands = new Set(SCRIPTS.map((s) => s.file));
    for (const file of luaFiles(SRC)) {
      const name = relative(SRC, file);
      if (dirname(file).endsWith('/includes')) {
        const part = /([^/]+)\.lua$/.exec(file)?.[1] ?? '';
        const users = SCRIPTS.filter((s) => dirname(s.file) === dirname(dirname(file)));
        expect(
          users.some((s) => s.includes.includes(part)),
          `${name} is included by a script`,
        ).toBe(true);
      } else expect(commands.has(file), `${name} is loaded`).toBe(true);
    }
    expect(new Set(SCRIPTS.map((s) => s.command)).size).toBe(SCRIPTS.length);
  });

  it('follow the naming rule: verb(-noun).lua, command lt + PascalCase', () => {
    for (const s of SCRIPTS) {
      expect(s.name).toMatch(/^[a-z]+(-[a-z]+)*$/);
      expect(s.command).toBe(
        `lt${s.name.replace(/(^|-)([a-z])/g, (_, _dash: string, c: string) => c.toUpperCase())}`,
      );
    }
  });

  it.each(SCRIPTS.map((s) => [s.name, s] as const))(
    '%s declares the key count its header lists, and reads no numbered key beyond it',
    (_name, s) => {
      const source = readFileSync(s.file, 'utf8');
      const listed = listedKeys(header(source));
      expect(listed.perCall, `${s.name}: keys vary per call`).toBe(s.variadic);
      if (s.variadic) {
        expect(listed.numbered).toEqual(upTo(listed.numbered.length));
        expect(listed.least, `${s.name}: fewest keys`).toBe(s.keys);
      } else {
        expect(listed.numbered, `${s.name}: KEYS listed`).toEqual(upTo(s.keys));
      }
      const body = code(s.lua);
      for (const [, index = ''] of body.matchAll(/KEYS\[\s*([^\]]*?)\s*\]/g)) {
        if (/^\d+$/.test(index))
          expect(Number(index), `${s.name} reads KEYS[${index}]`).toBeLessThanOrEqual(s.keys);
        // A fixed count: only numbered keys, so the header's count is all the script can touch.
        else expect(s.variadic, `${s.name} reads KEYS[${index}]`).toBe(true);
      }
      if (!s.variadic) expect(body).not.toMatch(/#KEYS/);
    },
  );

  it.each(SCRIPTS.map((s) => [s.name, s] as const))(
    '%s compiles on Redis as spliced, with each include once',
    async (_name, s) => {
      expect(s.lua).not.toMatch(/^--- @include/m);
      const source = readFileSync(s.file, 'utf8');
      for (const [, part = ''] of source.matchAll(/^--- @include "([^"]+)"/gm)) {
        expect(s.includes).toContain(part);
        const text = readFileSync(join(dirname(s.file), 'includes', `${part}.lua`), 'utf8').trimEnd();
        expect(s.lua.split(text).length - 1, `${part} spliced once into ${s.name}`).toBe(1);
      }
      // SCRIPT LOAD compiles without running: the sha Redis answers is the one EVALSHA will send.
      expect(await redis.script('LOAD', s.lua)).toBe(s.sha);
    },
  );

  it('keeps a #!lua line first, and makes a no-writes script a read', () => {
    for (const s of SCRIPTS) {
      const first = readFileSync(s.file, 'utf8').split('\n')[0] ?? '';
      expect(s.lua.split('\n')[0]).toBe(first);
      expect(s.readOnly).toBe(/^#!lua.*no-writes/.test(first));
    }
    expect(LIMITER_SCRIPTS.get('peek').readOnly).toBe(true);
  });
});

describe('defining and running', () => {
  it('defines each command once per client: a second define, or a run, redefines nothing', async () => {
    const client = newRedis();
    try {
      const define = vi.spyOn(client, 'defineCommand');
      for (const set of SETS) set.define(client);
      expect(define).toHaveBeenCalledTimes(SCRIPTS.length);
      const acquire = (client as unknown as Record<string, unknown>).ltAcquire;
      for (const set of SETS) set.define(client);
      await LIMITER_SCRIPTS.run(client, 'block', [`${prefix}:block`], ['429', 1000]);
      expect(define).toHaveBeenCalledTimes(SCRIPTS.length);
      expect((client as unknown as Record<string, unknown>).ltAcquire).toBe(acquire);
    } finally {
      await client.quit();
    }
  });

  it('runs a fixed-count and a per-call-count script, and refuses a key list of the wrong length', async () => {
    const block = `${prefix}:org:block`;
    expect(await LIMITER_SCRIPTS.run(redis, 'block', [block], ['429', 60_000])).toBe(1);
    // peek with no token: org log, inflight, block, the policy hash and the pace hash (--- @keys 5+).
    const view = (await LIMITER_SCRIPTS.run(
      redis,
      'peek',
      [`${prefix}:org:log`, `${prefix}:org:inflight`, block, `${prefix}:org:policy`, `${prefix}:org:pace`],
      [5, 1000, 9, 1000, ''],
    )) as unknown[];
    expect((view[1] as unknown[])[3]).toBe('429');
    expect(() => LIMITER_SCRIPTS.run(redis, 'block', [block, block], ['429', 1])).toThrow(
      /block\.lua takes 1 keys \(--- @keys 1\), given 2/,
    );
    expect(() => LIMITER_SCRIPTS.run(redis, 'peek', [block], [])).toThrow(/takes 5 or more keys/);
  });

  it('defines on a Cluster client once, and its pipelines have the commands', () => {
    const cluster = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true });
    try {
      const define = vi.spyOn(cluster, 'defineCommand');
      OUTCOME_SCRIPTS.define(cluster);
      OUTCOME_SCRIPTS.define(cluster);
      expect(define).toHaveBeenCalledTimes(OUTCOME_SCRIPTS.all.length);
      const pipeline = cluster.pipeline();
      expect('ltRecordOutcome' in pipeline).toBe(true);
      OUTCOME_SCRIPTS.queue(pipeline, 'record-outcome', ['{o}:a', '{o}:b', '{o}:c', '{o}:d'], []);
      expect(pipeline.length).toBe(1);
    } finally {
      cluster.disconnect();
    }
  });
});

/** A folder of scripts for the loader: name -> text, includes as `includes/<name>`. */
function folder(name: string, files: Record<string, string>): string {
  const dir = join(fixtures, name);
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    writeFileSync(join(dir, file), text);
  }
  return dir;
}

const HEAD = '--[[\n  A test script.\n  KEYS none\n]]\n--- @keys 0\n';

describe('the loader refuses', () => {
  it('an include loop, naming it', () => {
    const dir = folder('loop', {
      'loop-parts.lua': `${HEAD}--- @include "a"\nreturn 1\n`,
      'includes/a.lua': '--- @include "b"\n',
      'includes/b.lua': '--- @include "a"\n',
    });
    expect(() => loadScripts(dir, ['loop-parts'])).toThrow(/include loop a -> b -> a/);
    const self = folder('self', {
      'self-part.lua': `${HEAD}--- @include "c"\nreturn 1\n`,
      'includes/c.lua': '--- @include "c"\n',
    });
    expect(() => loadScripts(self, ['self-part'])).toThrow(/include loop c -> c/);
  });

  it('a missing include, naming the file it looked for', () => {
    const dir = folder('missing', { 'miss-part.lua': `${HEAD}--- @include "nowhere"\nreturn 1\n` });
    expect(() => loadScripts(dir, ['miss-part'])).toThrow(
      /includes "nowhere", but there is no .*includes\/nowhere\.lua/,
    );
  });

  it('a script without a key count, an include with one, and an unknown tag', () => {
    const none = folder('no-keys', { 'count-nothing.lua': '--[[\n  x\n]]\nreturn 1\n' });
    expect(() => loadScripts(none, ['count-nothing'])).toThrow(/no --- @keys line/);
    const part = folder('part-keys', {
      'count-part.lua': `${HEAD}--- @include "d"\nreturn 1\n`,
      'includes/d.lua': '--- @keys 1\n',
    });
    expect(() => loadScripts(part, ['count-part'])).toThrow(/an include declares no key count/);
    const tag = folder('tag', { 'tag-typo.lua': `${HEAD}--- @inclde "d"\nreturn 1\n` });
    expect(() => loadScripts(tag, ['tag-typo'])).toThrow(/unknown tag/);
  });

  it('a .lua file the folder does not name, and a name without its file', () => {
    const dir = folder('stray', {
      'named-one.lua': `${HEAD}return 1\n`,
      'stray-one.lua': `${HEAD}return 1\n`,
    });
    expect(() => loadScripts(dir, ['named-one'])).toThrow(/stray-one\.lua not in the folder's list/);
    expect(() => loadScripts(dir, ['named-one', 'stray-one', 'absent-one'])).toThrow(/no absent-one\.lua/);
  });
});

describe('includes', () => {
  it('are spliced once each, nested ones too, and run', async () => {
    const dir = folder('diamond', {
      'sum-parts.lua': `${HEAD}--- @include "x"\n--- @include "y"\n--- @include "x"\nreturn lt_x() + lt_y()\n`,
      'includes/x.lua': '--- @include "z"\nlocal function lt_x() return lt_z() + 1 end\n',
      'includes/y.lua': '--- @include "z"\nlocal function lt_y() return lt_z() + 2 end\n',
      'includes/z.lua': 'local function lt_z() return 10 end\n',
    });
    const set = loadScripts(dir, ['sum-parts']);
    const s = set.get('sum-parts');
    expect(s.includes).toEqual(['z', 'x', 'y']);
    expect(s.lua.split('local function lt_z').length - 1).toBe(1);
    expect(s.lua.split('local function lt_x').length - 1).toBe(1);
    expect(await set.run(redis, 'sum-parts', [], [])).toBe(23);
  });
});
