// The code cache of a build (src/cli/bundle-loader.ts), on copies of the tests' build: a command's first
// run writes a cache beside each file it loaded, the next runs use them (V8 accepted them: nothing is
// written again), a run with other flags keeps caches of its own beside them, and cli/warm.cjs writes
// one for every file, as the Docker image does at its build.
import { cpSync, mkdtempSync, readdirSync, readFileSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT, spawnNode, waitExit, type CliResult } from '../helpers/cli.ts';
import { TEST_CLI_DIR } from '../helpers/cli-build.ts';
import { deletePrefix, newRedis, randomPrefix, REDIS_URL } from '../helpers/redis.ts';

const prefix = randomPrefix('code-cache');
const env = {
  PATH: process.env.PATH ?? '',
  HOME: tmpdir(),
  REDIS_URL,
  QUEUE_PREFIX: prefix,
  LEARNER_API_TOKENS: 'acme:code-cache-token-1',
};

/** A copy of the tests' build with no cache, where the packages it leaves out resolve. */
function copyOfBuild(): string {
  const dir = mkdtempSync(join(tmpdir(), 'lt-code-cache-'));
  cpSync(TEST_CLI_DIR, join(dir, 'build'), {
    recursive: true,
    filter: (src) => !src.endsWith('.cache') && !src.endsWith('.tmp'),
  });
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  return join(dir, 'build');
}

function run(args: string[], more: Record<string, string> = {}): Promise<CliResult> {
  return waitExit(spawnNode(args, { ...env, ...more }));
}

/**
 * Each cache of `build` whose name has `tag` (V8's, of one Node and its flags), by the file it is of,
 * and when it was written; each is headed by its file's first line (the build's hash of it) and length.
 */
function caches(build: string, tag = '[0-9a-f]+'): Map<string, number> {
  const found = new Map<string, number>();
  const pattern = new RegExp(`^([\\w-]+\\.cjs)\\.${tag}\\.cache$`);
  for (const dir of ['cli', 'chunks', 'vendor'])
    for (const name of readdirSync(join(build, dir))) {
      const of = pattern.exec(name)?.[1];
      if (!of) continue;
      const text = readFileSync(join(build, dir, of), 'utf8');
      const data = readFileSync(join(build, dir, name));
      expect(data.toString('latin1', 0, data.indexOf(10)), name).toBe(
        `${text.split('\n')[0]} ${text.length}`,
      );
      expect(found.has(`${dir}/${of}`), name).toBe(false);
      found.set(`${dir}/${of}`, statSync(join(build, dir, name)).mtimeMs);
    }
  return found;
}

/** The tag in the names of the caches of `build`'s cli/main.cjs. */
function tagsOfMain(build: string): string[] {
  return readdirSync(join(build, 'cli')).flatMap((n) => /^main\.cjs\.([0-9a-f]+)\.cache$/.exec(n)?.[1] ?? []);
}

afterAll(async () => {
  const redis = newRedis();
  await deletePrefix(redis, prefix);
  await redis.quit();
});

describe('the code cache of a build', () => {
  it("is written by a command's first run, for each file it loaded, and used by the next", async () => {
    const build = copyOfBuild();
    expect(caches(build).size).toBe(0);
    const first = await run([join(build, 'cli', 'start.cjs'), 'status']);
    expect(first.code, first.stderr).toBe(0);
    const written = caches(build);
    // The table, commander, the command's own file and the chunks it shares.
    expect([...written.keys()]).toEqual(expect.arrayContaining(['cli/main.cjs', 'vendor/commander.cjs']));
    expect([...written.keys()].some((k) => /^cli\/status-\w+\.cjs$/.test(k))).toBe(true);
    expect(written.size).toBeGreaterThan(10);
    const second = await run([join(build, 'cli', 'start.cjs'), 'status']);
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout.replace(/^status at .*$/m, '')).toBe(first.stdout.replace(/^status at .*$/m, ''));
    // Accepted by V8: a cache refused, or missing, is written again.
    expect(caches(build)).toEqual(written);
    // Other flags, which V8 would refuse these for: caches of their own, beside.
    const [tag] = tagsOfMain(build);
    const flagged = await run([join(build, 'cli', 'start.cjs'), 'status'], {
      NODE_OPTIONS: '--max-old-space-size=128',
    });
    expect(flagged.code, flagged.stderr).toBe(0);
    const tags = tagsOfMain(build);
    expect(tags).toHaveLength(2);
    expect(caches(build, tag)).toEqual(written);
    expect(
      caches(
        build,
        tags.find((t) => t !== tag),
      ).size,
    ).toBe(written.size);
  });

  it('cli/warm.cjs writes one for every file, which the commands then use', async () => {
    const build = copyOfBuild();
    const warm = await run([join(build, 'cli', 'warm.cjs')]);
    expect(warm.code, warm.stderr).toBe(0);
    const files = ['cli', 'chunks', 'vendor'].flatMap((dir) =>
      readdirSync(join(build, dir))
        .filter((n) => n.endsWith('.cjs') && !['start.cjs', 'warm.cjs'].includes(n))
        .map((n) => `${dir}/${n}`),
    );
    const written = caches(build);
    expect([...written.keys()].sort()).toEqual(files.sort());
    expect(warm.stdout).toContain(`code cache written for ${files.length} files`);
    const status = await run([join(build, 'cli', 'start.cjs'), 'status']);
    expect(status.code, status.stderr).toBe(0);
    expect(caches(build)).toEqual(written);
  });
});
