// The parts of bench/orgs.ts a wrong figure would come from: the limit past which LEARNER_API_TOKENS
// cannot reach a child (the real execve's, not a guess), the token file, and the /proc reading.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/core/config.ts';
import { procSample } from '../../bench/orgs-probes.ts';
import { MAX_ARG_STRLEN, orgKeys, tokenEnv, tokensFor } from '../../bench/orgs-tokens.ts';

const dir = mkdtempSync(join(tmpdir(), 'lt-bench-orgs-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Whether a child process starts with `name=value` in its environment. */
function passes(name: string, value: string): boolean {
  const r = spawnSync(process.execPath, ['-e', '0'], { env: { [name]: value } });
  return r.error === undefined && r.status === 0;
}

describe('bench/orgs tokens', () => {
  it('MAX_ARG_STRLEN is where execve refuses one variable', () => {
    const fits = 'a'.repeat(MAX_ARG_STRLEN - 'X='.length - 1);
    expect(passes('X', fits)).toBe(true);
    expect(passes('X', `${fits}a`)).toBe(false);
  });

  it('1,000 tokens pass as LEARNER_API_TOKENS, and the config reads every organization', () => {
    const tokens = tokensFor(orgKeys(1000));
    const te = tokenEnv(tokens, dir, false);
    if (!te.ok) throw new Error(te.why);
    expect(te.via).toBe('LEARNER_API_TOKENS');
    expect(passes('LEARNER_API_TOKENS', te.env.LEARNER_API_TOKENS ?? '')).toBe(true);
    expect(loadConfig(te.env).orgs).toEqual(orgKeys(1000));
  });

  it('10,000 tokens are not measurable through one variable, and the reason shows no token', () => {
    const tokens = tokensFor(orgKeys(10_000));
    const te = tokenEnv(tokens, dir, false);
    expect(te.ok).toBe(false);
    const why = te.ok ? '' : te.why;
    expect(why).toMatch(/^not measurable: too many tokens for one variable/);
    expect(why).not.toContain('tok-');
    expect(passes('LEARNER_API_TOKENS', tokens.map((t) => `${t.org}:${t.token}`).join(','))).toBe(false);
  });

  it('the token file holds one ORG:TOKEN a line, readable by its owner only', () => {
    const tokens = tokensFor(orgKeys(10_000));
    const te = tokenEnv(tokens, dir, true);
    if (!te.ok) throw new Error(te.why);
    const file = te.env.LEARNER_API_TOKENS_FILE ?? '';
    expect(statSync(file).mode & 0o077).toBe(0);
    const lines = readFileSync(file, 'utf8').trimEnd().split('\n');
    expect(lines).toHaveLength(10_000);
    expect(lines[41]).toBe(`o00042:${tokens[41]?.token}`);
  });
});

describe('bench/orgs /proc reading', () => {
  it('reads CPU time and RSS of a live process, nothing of a gone one', () => {
    const burn = Date.now() + 50;
    while (Date.now() < burn);
    const s = procSample(process.pid);
    expect(s?.cpuS).toBeGreaterThan(0);
    expect(s?.rssKb).toBeGreaterThan(1024);
    const gone = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']);
    expect(procSample(Number(gone.stdout.toString()))).toBeUndefined();
  });
});
