// LEARNER_API_TOKENS_FILE read on its own (core/token-file.ts) and through loadConfig: what a line may
// look like, what a bad one is called (the file and the line, never the token), and the live token set
// (core/token-book.ts) with the scrubbers that follow it.
import { problemsOf } from '../helpers/config-problems.ts';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig, tokenFingerprint } from '../../src/core/config.ts';
import { createLogger, secretScrubber } from '../../src/core/log.ts';
import { TokenBook, type TokenChange } from '../../src/core/token-book.ts';
import { parseTokenFile, readTokenFile, tokenFileModeWarning } from '../../src/core/token-file.ts';
import { tokenRef } from '../../src/core/token-ref.ts';

const dir = mkdtempSync(join(tmpdir(), 'lt-tokfile-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, text: string, mode = 0o600): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  chmodSync(path, mode);
  return path;
}

/** Long, unlike any word of a message: a fragment of one in a text is a leak. */
const SECRET_A = 'Qk7vT2mXw9LpR4nB8cZ3';
const SECRET_B = 'Hy6dF1gJ0kS5uE2aXoVi';
const SECRET_C = 'Wn3bM8qC5rT1zP7yL4eK';

function expectNoSecret(text: string, secrets: readonly string[]): void {
  for (const s of secrets) {
    for (let i = 0; i + 8 <= s.length; i++) expect(text, 'a token fragment').not.toContain(s.slice(i, i + 8));
  }
}

describe('parseTokenFile', () => {
  it('reads one ORG:TOKEN a line, skipping comments and blank lines, whatever the line endings', () => {
    const text =
      `\uFEFF# tokens of the reseller\r\n` +
      `\r\n` +
      `  acme : ${SECRET_A}  \r\n` +
      `\t# beta's, rotated in May\n` +
      `beta:${SECRET_B}\r` +
      `acme:${SECRET_C}\n` +
      `   \n`;
    const read = parseTokenFile(text, '/run/secrets/t');
    expect(read.ok).toBe(true);
    if (!read.ok) return;
    expect(read.tokens.map((t) => [t.org, t.id])).toEqual([
      ['acme', tokenFingerprint(SECRET_A)],
      ['beta', tokenFingerprint(SECRET_B)],
      ['acme', tokenFingerprint(SECRET_C)],
    ]);
    expect(read.tokens.map((t) => t.secret)).toEqual([SECRET_A, SECRET_B, SECRET_C]);
    // The secret stays out of JSON by accident, as for LEARNER_API_TOKENS.
    expectNoSecret(JSON.stringify(read.tokens), [SECRET_A, SECRET_B, SECRET_C]);
  });

  it('names each bad line by file and line, never with its text', () => {
    const text = [
      '# header',
      `acme ${SECRET_A}`, // 2: no colon
      `ac me:${SECRET_B}`, // 3: not an org key
      'beta:   ', // 4: empty token
      `acme:${SECRET_C} # main token`, // 5: a comment after the token
      `acme:${SECRET_A},beta:${SECRET_B}`, // 6: two entries on one line
      `:${SECRET_B}`, // 7: no org
      `beta:${SECRET_B}`, // 8: good
      `gamma:${SECRET_B}`, // 9: the token of line 8 again
    ].join('\n');
    const read = parseTokenFile(text, '/run/secrets/x');
    expect(read.ok).toBe(false);
    if (read.ok) return;
    expect(read.problems.map((p) => p.slice(0, p.indexOf(':')))).toEqual(
      [2, 3, 4, 5, 6, 7, 9].map((n) => `LEARNER_API_TOKENS_FILE /run/secrets/x line ${n}`),
    );
    expect(read.problems[0]).toMatch(/line 2: not ORG:TOKEN with ORG made of letters, digits, _ or -/);
    expect(read.problems[2]).toBe(
      "LEARNER_API_TOKENS_FILE /run/secrets/x line 4: org 'beta' has an empty token",
    );
    expect(read.problems[3]).toMatch(/line 5: org 'acme': the token contains a comma, space or tab/);
    expect(read.problems[6]).toBe(
      "LEARNER_API_TOKENS_FILE /run/secrets/x line 9: org 'gamma' repeats the token of line 8",
    );
    expectNoSecret(read.problems.join('\n'), [SECRET_A, SECRET_B, SECRET_C]);
  });

  it('says the first ten problems of a corrupt file and counts the rest', () => {
    const text = Array.from({ length: 25 }, (_, i) => `garbage line ${i} ${SECRET_A}`).join('\n');
    const read = parseTokenFile(text, 'f');
    expect(read.ok).toBe(false);
    if (read.ok) return;
    expect(read.problems).toHaveLength(11);
    expect(read.problems[9]).toMatch(/^LEARNER_API_TOKENS_FILE f line 10: /);
    expect(read.problems[10]).toBe('LEARNER_API_TOKENS_FILE f: 15 more bad lines');
    expectNoSecret(read.problems.join('\n'), [SECRET_A]);
  });
});

describe('readTokenFile', () => {
  it('names the path and the system code of a file it cannot read, and refuses what is not a file', () => {
    const missing = join(dir, 'nope');
    expect(readTokenFile(missing)).toEqual({
      ok: false,
      problems: [`LEARNER_API_TOKENS_FILE ${missing}: cannot read it (ENOENT)`],
    });
    const sub = join(dir, 'a-dir');
    mkdirSync(sub);
    expect(readTokenFile(sub)).toEqual({
      ok: false,
      problems: [`LEARNER_API_TOKENS_FILE ${sub}: not a regular file`],
    });
  });

  it('warns of a file that other users may read', () => {
    const open = file('open', `acme:${SECRET_A}\n`, 0o644);
    expect(tokenFileModeWarning(open)).toBe(
      `LEARNER_API_TOKENS_FILE ${open} is readable by every user (mode 0644): it holds API tokens; ` +
        'make it 0600 or 0400 (a Kubernetes Secret: defaultMode 0400)',
    );
    expect(tokenFileModeWarning(file('group', `acme:${SECRET_A}\n`, 0o640))).toMatch(
      /readable by its group \(mode 0640\)/,
    );
    expect(tokenFileModeWarning(file('private', `acme:${SECRET_A}\n`, 0o400))).toBeUndefined();
  });
});

describe('loadConfig with LEARNER_API_TOKENS_FILE', () => {
  it('gives the same tokens, ids and organizations as LEARNER_API_TOKENS', () => {
    const path = file('same', `# mine\nacme:${SECRET_A}\nbeta:${SECRET_B}\n\nacme:${SECRET_C}\n`);
    const fromFile = loadConfig({ LEARNER_API_TOKENS_FILE: path }, { requireTokens: true });
    const fromEnv = loadConfig({ LEARNER_API_TOKENS: `acme:${SECRET_A},beta:${SECRET_B},acme:${SECRET_C}` });
    expect(fromFile.tokens.map((t) => [t.org, t.id, t.secret])).toEqual(
      fromEnv.tokens.map((t) => [t.org, t.id, t.secret]),
    );
    expect(fromFile.orgs).toEqual(['acme', 'beta']);
    expect(fromFile.tokensFile).toBe(path);
    expect(fromFile.tokensReloadMs).toBe(30_000);
    expect(fromEnv.tokensFile).toBeUndefined();
    expectNoSecret(JSON.stringify(fromFile), [SECRET_A, SECRET_B, SECRET_C]);
  });

  it('refuses both set, a bad line, an unreadable file and an empty one, naming the place', () => {
    const good = file('good', `acme:${SECRET_A}\n`);
    const both = problemsOf({ LEARNER_API_TOKENS: `acme:${SECRET_B}`, LEARNER_API_TOKENS_FILE: good });
    expect(both).toEqual([
      `LEARNER_API_TOKENS, LEARNER_API_TOKENS_FILE: both are set; give the tokens in one place (unset LEARNER_API_TOKENS to use ${good})`,
    ]);
    const bad = file('bad', `acme:${SECRET_A}\n\n# x\n\n\n\nacme=${SECRET_B}\n`);
    expect(problemsOf({ LEARNER_API_TOKENS_FILE: bad })).toEqual([
      expect.stringMatching(new RegExp(`^LEARNER_API_TOKENS_FILE ${bad} line 7: not ORG:TOKEN`)),
    ]);
    const missing = join(dir, 'missing');
    expect(problemsOf({ LEARNER_API_TOKENS_FILE: missing }, { requireTokens: true })).toEqual([
      `LEARNER_API_TOKENS_FILE ${missing}: cannot read it (ENOENT)`,
    ]);
    const empty = file('empty', '# nothing yet\n\n');
    expect(problemsOf({ LEARNER_API_TOKENS_FILE: empty }, { requireTokens: true })).toEqual([
      `LEARNER_API_TOKENS_FILE ${empty}: no ORG:TOKEN line (one a line, like acme:TOKEN1)`,
    ]);
    expectNoSecret([...both].join('\n'), [SECRET_A, SECRET_B]);
  });

  it('reads TOKENS_RELOAD_INTERVAL as a duration, 0 for none', () => {
    expect(loadConfig({ TOKENS_RELOAD_INTERVAL: '5s' }).tokensReloadMs).toBe(5000);
    expect(loadConfig({ TOKENS_RELOAD_INTERVAL: '0' }).tokensReloadMs).toBe(0);
    expect(problemsOf({ TOKENS_RELOAD_INTERVAL: 'often' })).toEqual([
      "TOKENS_RELOAD_INTERVAL: expected a duration like 30s or 1500ms (units ms, s, m, h, d), or 0 for none, got 'often'",
    ]);
  });
});

describe('TokenBook', () => {
  const a = tokenRef('acme', SECRET_A);
  const b = tokenRef('beta', SECRET_B);
  const c = tokenRef('acme', SECRET_C);

  it('replaces the tokens, returns and announces what changed, and keeps scrubbing removed secrets', () => {
    const book = new TokenBook([a, b]);
    const heard: TokenChange[] = [];
    const off = book.onChange((ch) => heard.push(ch));
    const mapBefore = book.byOrg();
    expect(book.replace([b, a])).toMatchObject({ added: [], removed: [] });
    expect(heard).toEqual([]); // the same tokens in another order change nothing
    expect(book.byOrg()).toBe(mapBefore);

    // acme's token rotated (a -> c), beta's removed, so beta is gone.
    const change = book.replace([c]);
    expect(change).toEqual({
      added: [c],
      removed: [a, b],
      orgsChanged: ['acme', 'beta'],
      orgsAdded: [],
      orgsRemoved: ['beta'],
    });
    expect(heard).toEqual([change]);
    expect(book.orgs()).toEqual(['acme']);
    expect(book.tokensOf('acme')).toEqual([c]);
    expect(book.tokensOf('beta')).toEqual([]);
    expect(book.byOrg()).not.toBe(mapBefore);
    expect(book.all()).toEqual([c]);
    // The removed secrets are still scrubbed: a call in flight may answer with one.
    expect([...book.secrets()].sort()).toEqual([SECRET_A, SECRET_B, SECRET_C].sort());

    off();
    expect(book.replace([c, b]).orgsAdded).toEqual(['beta']);
    expect(heard).toHaveLength(1);
  });

  it('tells every listener, then reports a failing one', () => {
    const errors: unknown[] = [];
    const book = new TokenBook([a], { onListenerError: (err) => errors.push(err) });
    const heard: string[] = [];
    book.onChange(() => {
      throw new Error('boom');
    });
    book.onChange(() => heard.push('second'));
    book.replace([a, b]);
    expect(heard).toEqual(['second']);
    expect(errors).toHaveLength(1);
    const strict = new TokenBook([a]);
    strict.onChange(() => {
      throw new Error('boom');
    });
    expect(() => strict.replace([b])).toThrow('boom');
    expect(strict.all()).toEqual([b]);
  });

  it('drives the scrubbers and the logger given a getter: a token added later is scrubbed too', () => {
    const book = new TokenBook([a]);
    const scrub = secretScrubber(() => book.secrets());
    const lines: string[] = [];
    const log = createLogger({
      secrets: () => book.secrets(),
      destination: { write: (l: string) => void lines.push(l) },
    });
    expect(scrub(`x ${SECRET_A} ${SECRET_B}`)).toBe(`x [Redacted] ${SECRET_B}`);
    book.replace([b]);
    expect(scrub(`x ${SECRET_A} ${SECRET_B}`)).toBe('x [Redacted] [Redacted]');
    log.info({ said: `the service echoed ${SECRET_B} and ${SECRET_A}` }, 'echo');
    expect(lines).toHaveLength(1);
    expectNoSecret(lines.join(''), [SECRET_A, SECRET_B]);
  });
});
