// The token file read again (app/token-reload.ts) against real Redis: a rotation, an addition and a
// removal replace the tokens in force and are written to the change log by id; a bad or empty file
// changes nothing and is said once per distinct error; a token Redis binds to another organization is
// refused alone. No token reaches Redis or the log.
import { tokenLeaks, writeTokenFile } from '../helpers/token-leaks.ts';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { TokenReloader } from '../../src/app/token-reload.ts';
import { loadConfig, tokenFingerprint } from '../../src/core/config.ts';
import { createKeys } from '../../src/core/keys.ts';
import { createLogger } from '../../src/core/log.ts';
import { TokenBook } from '../../src/core/token-book.ts';
import { readChanges } from '../../src/limiter/control-log.ts';
import { bindTokens, rebindToken, tokenBindings } from '../../src/limiter/token-orgs.ts';
import { closeRedis } from '../../src/redis/client.ts';
import { deletePrefix, dumpPrefix, newRedis, randomPrefix } from '../helpers/redis.ts';
import { waitUntil } from '../helpers/wait.ts';

const A = 'rlA-Qk7vT2mXw9LpR4nB8cZ3';
const B = 'rlB-Hy6dF1gJ0kS5uE2aXoVi';
const C = 'rlC-Wn3bM8qC5rT1zP7yL4eK';
const D = 'rlD-Jd2sG9hV6xN3cQ8wR5tU';
const ALL = [A, B, C, D];
const id = tokenFingerprint;

const redis = newRedis();
const prefix = randomPrefix('tokreload');
const keys = createKeys(prefix);
const dir = mkdtempSync(join(tmpdir(), 'lt-tokreload-'));
const path = join(dir, 'learner-tokens');
const lines: string[] = [];

const writeTokens = (text: string) => writeTokenFile(path, text);

const leaks = (texts: readonly string[]) => tokenLeaks(texts, ALL);

/** The log lines (JSON) at error level whose message matches. */
const errorsMatching = (re: RegExp) =>
  lines
    .map((l) => JSON.parse(l) as { level: number; msg: string })
    .filter((l) => l.level === 50 && re.test(l.msg));

let book: TokenBook;
let reloader: TokenReloader;

beforeEach(async () => {
  await deletePrefix(redis, prefix);
  lines.length = 0;
  writeTokens(`# start\nacme:${A}\n`);
  const config = loadConfig({ LEARNER_API_TOKENS_FILE: path }, { requireTokens: true });
  book = new TokenBook(config.tokens);
  const logger = createLogger({
    level: 'debug',
    secrets: () => book.secrets(),
    destination: { write: (l: string) => void lines.push(l) },
  });
  await bindTokens(redis, prefix, config.tokens);
  reloader = new TokenReloader({ tokens: book, redis, keys, logger }, { path, intervalMs: 0 });
});

afterAll(async () => {
  await reloader?.stop();
  await deletePrefix(redis, prefix);
  await closeRedis(redis);
  rmSync(dir, { recursive: true, force: true });
});

describe('TokenReloader', () => {
  it('applies a rotation, an addition and a removal, each in the change log by id', async () => {
    expect(await reloader.reload('interval')).toEqual({ status: 'unchanged' });
    // Other comments, other spaces, other line endings: the same tokens, nothing to do.
    writeTokens(`# the same token\r\n\r\n  acme : ${A}  \r\n`);
    expect(await reloader.reload('interval')).toEqual({ status: 'unchanged' });

    writeTokens(`acme:${B}\n`);
    const rotated = await reloader.reload('SIGHUP');
    expect(rotated).toMatchObject({ status: 'changed', refused: [] });
    expect(book.all().map((t) => t.id)).toEqual([id(B)]);

    writeTokens(`acme:${B}\r\n# beta joins\r\nbeta:${C}\r\n`);
    expect(await reloader.reload('interval')).toMatchObject({
      status: 'changed',
      change: { orgsAdded: ['beta'], orgsChanged: ['beta'] },
    });
    expect(book.orgs()).toEqual(['acme', 'beta']);

    writeTokens(`acme:${B}\n`);
    expect(await reloader.reload('interval')).toMatchObject({
      status: 'changed',
      change: { orgsRemoved: ['beta'] },
    });

    const changes = await readChanges(redis, keys, { count: 10 });
    expect(
      changes.map((c) => [c.action, c.org, c.details.trigger, c.details.added, c.details.removed]),
    ).toEqual([
      ['tokens.reload', 'beta', 'interval', [], [id(C)]],
      ['tokens.reload', 'beta', 'interval', [id(C)], []],
      ['tokens.reload', 'acme', 'SIGHUP', [id(B)], [id(A)]],
    ]);
    for (const c of changes) {
      expect(c.who).toMatch(new RegExp(`^work:.+@.+:${process.pid}$`));
      expect(c.details.file).toBe(path);
    }
    // New tokens are bound to their organization, as at start.
    expect(await tokenBindings(redis, prefix)).toMatchObject({ [id(B)]: 'acme', [id(C)]: 'beta' });
    expect(leaks(await dumpPrefix(redis, prefix))).toEqual([]);
    expect(leaks(lines)).toEqual([]);
  });

  it('keeps the tokens in force when the file is bad, unreadable or empty, and says so once per error', async () => {
    writeTokens(`acme:${A}\nacme ${B}\n`);
    const bad = await reloader.reload('interval');
    expect(bad).toEqual({
      status: 'failed',
      problems: [expect.stringMatching(new RegExp(`^LEARNER_API_TOKENS_FILE ${path} line 2: not ORG:TOKEN`))],
    });
    expect(book.all().map((t) => t.id)).toEqual([id(A)]);
    expect(errorsMatching(/line 2: not ORG:TOKEN/)).toHaveLength(1);
    expect(errorsMatching(/the 1 tokens in force are kept/)).toHaveLength(1);
    // The same error at the next interval is not said again; a SIGHUP always answers.
    expect(await reloader.reload('interval')).toEqual({ status: 'unchanged' });
    expect(errorsMatching(/line 2: not ORG:TOKEN/)).toHaveLength(1);
    await reloader.reload('SIGHUP');
    expect(errorsMatching(/line 2: not ORG:TOKEN/)).toHaveLength(2);

    writeTokens('# all gone\n');
    expect(await reloader.reload('interval')).toMatchObject({ status: 'failed' });
    expect(errorsMatching(/no ORG:TOKEN line \(an empty file is taken for a mistake/)).toHaveLength(1);

    rmSync(path);
    expect(await reloader.reload('interval')).toEqual({
      status: 'failed',
      problems: [`LEARNER_API_TOKENS_FILE ${path}: cannot read it (ENOENT)`],
    });
    expect(book.all().map((t) => t.id)).toEqual([id(A)]);
    expect(await readChanges(redis, keys)).toEqual([]);
    expect(leaks(lines)).toEqual([]);
  });

  it('refuses a new token that Redis binds to another organization, and takes the others', async () => {
    await bindTokens(redis, prefix, [{ id: id(C), org: 'beta' }]);
    writeTokens(`acme:${A}\nacme:${C}\ngamma:${D}\n`);
    const r = await reloader.reload('interval');
    expect(r).toMatchObject({
      status: 'changed',
      refused: [{ token: { id: id(C), org: 'acme' }, boundTo: 'beta' }],
      change: { orgsAdded: ['gamma'] },
    });
    expect(book.tokensOf('acme').map((t) => t.id)).toEqual([id(A)]);
    expect(book.tokensOf('gamma').map((t) => t.id)).toEqual([id(D)]);
    const refusals = errorsMatching(/token refused, not used/);
    expect(refusals).toHaveLength(1);
    expect(refusals[0]?.msg).toContain(
      `token ${id(C)} is bound to organization 'beta' in Redis but LEARNER_API_TOKENS_FILE ${path} gives it to 'acme'`,
    );
    expect(refusals[0]?.msg).toContain(`tokens rebind --token ${id(C)} --org acme' and send SIGHUP`);
    // The same file at the next interval: nothing new to say.
    expect(await reloader.reload('interval')).toEqual({ status: 'unchanged' });
    expect(errorsMatching(/token refused/)).toHaveLength(1);

    // Rebound on purpose, then SIGHUP: taken.
    await rebindToken(redis, prefix, id(C), 'acme');
    expect(await reloader.reload('SIGHUP')).toMatchObject({
      status: 'changed',
      change: { added: [{ id: id(C) }] },
    });
    expect(book.tokensOf('acme').map((t) => t.id)).toEqual([id(A), id(C)]);
    expect(leaks(await dumpPrefix(redis, prefix))).toEqual([]);
    expect(leaks(lines)).toEqual([]);
  });

  it('reads the file on its interval, one reload at a time, and not after stop', async () => {
    const timed = new TokenReloader(
      { tokens: book, redis, keys, logger: createLogger({ level: 'silent' }) },
      { path, intervalMs: 50 },
    );
    timed.start();
    try {
      writeTokens(`acme:${B}\n`);
      await waitUntil('the interval to apply the file', () => book.tokensOf('acme')[0]?.id === id(B));
    } finally {
      await timed.stop();
    }
    writeTokens(`acme:${C}\n`);
    // Two at once: the second sees what the first applied.
    const [first, second] = await Promise.all([reloader.reload('interval'), reloader.reload('interval')]);
    expect(first.status).toBe('changed');
    expect(second.status).toBe('unchanged');
    await reloader.stop();
    writeTokens(`acme:${D}\n`);
    expect(await reloader.reload('SIGHUP')).toEqual({ status: 'unchanged' });
    expect(book.all().map((t) => t.id)).toEqual([id(C)]);
  });
});
