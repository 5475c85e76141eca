// The organizations and tokens of bench/orgs.ts, and how they reach a `work` process: the token file
// (LEARNER_API_TOKENS_FILE, one ORG:TOKEN a line) where the code reads one, else LEARNER_API_TOKENS, which
// Linux cannot pass once it is longer than one argument string may be.
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ENV_VARIABLES } from '../src/core/config.ts';

export interface OrgToken {
  org: string;
  token: string;
}

/** Linux MAX_ARG_STRLEN: the longest NAME=value (with its NUL) execve takes. */
export const MAX_ARG_STRLEN = 32 * 4096;

/** o00001, o00002, ...: one key per organization, sorted as numbered. */
export function orgKeys(n: number): string[] {
  return Array.from({ length: n }, (_, i) => `o${String(i + 1).padStart(5, '0')}`);
}

export function tokensFor(orgs: readonly string[]): OrgToken[] {
  return orgs.map((org) => ({ org, token: `tok-${org}-${randomBytes(6).toString('hex')}` }));
}

export function tokensVariable(tokens: readonly OrgToken[]): string {
  return tokens.map((t) => `${t.org}:${t.token}`).join(',');
}

/** Whether this checkout reads LEARNER_API_TOKENS_FILE (it is being added beside this bench). */
export function tokenFileSupported(): boolean {
  if (ENV_VARIABLES.includes('LEARNER_API_TOKENS_FILE')) return true;
  const core = join(import.meta.dirname, '..', 'src', 'core');
  return readdirSync(core)
    .filter((f) => f.endsWith('.ts'))
    .some((f) => readFileSync(join(core, f), 'utf8').includes('LEARNER_API_TOKENS_FILE'));
}

export type TokenEnv =
  | { ok: true; via: 'LEARNER_API_TOKENS_FILE' | 'LEARNER_API_TOKENS'; env: Record<string, string> }
  | { ok: false; why: string };

/** The environment that hands `tokens` to a child process, or why none can. */
export function tokenEnv(tokens: readonly OrgToken[], dir: string, useFile: boolean): TokenEnv {
  if (useFile) {
    const file = join(dir, 'learner-tokens');
    writeFileSync(file, `${tokens.map((t) => `${t.org}:${t.token}`).join('\n')}\n`, { mode: 0o600 });
    return { ok: true, via: 'LEARNER_API_TOKENS_FILE', env: { LEARNER_API_TOKENS_FILE: file } };
  }
  const value = tokensVariable(tokens);
  const bytes = Buffer.byteLength(`LEARNER_API_TOKENS=${value}`) + 1;
  if (bytes > MAX_ARG_STRLEN) {
    return {
      ok: false,
      why:
        `not measurable: too many tokens for one variable (LEARNER_API_TOKENS would be ` +
        `${Math.round(bytes / 1024)} KB, Linux passes at most ${MAX_ARG_STRLEN / 1024} KB)`,
    };
  }
  return { ok: true, via: 'LEARNER_API_TOKENS', env: { LEARNER_API_TOKENS: value } };
}
