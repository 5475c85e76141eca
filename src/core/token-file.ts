// LEARNER_API_TOKENS_FILE: one `ORG:TOKEN` a line, as a container's secret
// (docs/configuration.md). Messages name the file and the line, never its text.
import { readFileSync, statSync } from 'node:fs';
import { readTokenEntry, tokenRef, TOKEN_ENTRY_FORM, type TokenRef } from './token-ref.ts';

export const TOKENS_FILE_VAR = 'LEARNER_API_TOKENS_FILE';

/** Larger than any real token file (10,000 organizations fit in 2 MB). */
export const MAX_TOKEN_FILE_BYTES = 16 * 1024 * 1024;

/** A corrupt file could have a problem on every line: the first few say enough. */
const MAX_PROBLEMS = 10;

export type TokenFileRead = { ok: true; tokens: TokenRef[] } | { ok: false; problems: string[] };

/** The tokens of a file's text, or every problem (up to MAX_PROBLEMS), each naming its line. */
export function parseTokenFile(text: string, path: string): TokenFileRead {
  const where = (line: number) => `${TOKENS_FILE_VAR} ${path} line ${line}`;
  const tokens: TokenRef[] = [];
  const problems: string[] = [];
  const lineOf = new Map<string, number>();
  const lines = text.replace(/^\uFEFF/, '').split(/\r\n|\n|\r/);
  lines.forEach((raw, i) => {
    const n = i + 1;
    const line = raw.trim();
    if (line.length === 0 || line.startsWith('#')) return;
    const entry = readTokenEntry(line);
    if (!entry.ok) {
      problems.push(
        entry.why === 'empty-token'
          ? `${where(n)}: org '${entry.org}' has an empty token`
          : `${where(n)}: not ${TOKEN_ENTRY_FORM} (like acme:TOKEN1)`,
      );
      return;
    }
    // A comma never stands in an entry; a space or tab is most likely a comment after the token
    // (`acme:TOKEN # main`): both are refused.
    if (/[,\s]/.test(entry.secret)) {
      problems.push(
        `${where(n)}: org '${entry.org}': the token contains a comma, space or tab ` +
          '(one ORG:TOKEN per line; a comment goes on a line of its own, starting with #)',
      );
      return;
    }
    const first = lineOf.get(entry.secret);
    if (first !== undefined) {
      problems.push(`${where(n)}: org '${entry.org}' repeats the token of line ${first}`);
      return;
    }
    lineOf.set(entry.secret, n);
    tokens.push(tokenRef(entry.org, entry.secret));
  });
  if (problems.length > MAX_PROBLEMS) {
    const more = problems.length - MAX_PROBLEMS;
    problems.splice(MAX_PROBLEMS, more, `${TOKENS_FILE_VAR} ${path}: ${more} more bad lines`);
  }
  return problems.length > 0 ? { ok: false, problems } : { ok: true, tokens };
}

/** Reads and parses the file (see readTokenText). */
export function readTokenFile(path: string): TokenFileRead {
  const read = readTokenText(path);
  return read.ok ? parseTokenFile(read.text, path) : read;
}

/**
 * The file's text; an unreadable path names its system code, a non-regular file is refused.
 * Links are followed: a mounted Kubernetes Secret is a chain of them.
 */
export function readTokenText(path: string): { ok: true; text: string } | { ok: false; problems: string[] } {
  try {
    const stat = statSync(path);
    if (!stat.isFile()) return fail(path, 'not a regular file');
    if (stat.size > MAX_TOKEN_FILE_BYTES) {
      return fail(path, `${stat.size} bytes, more than a token file holds (${MAX_TOKEN_FILE_BYTES})`);
    }
    return { ok: true, text: readFileSync(path, 'utf8') };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    return fail(path, `cannot read it (${code})`);
  }
}

function fail(path: string, why: string): { ok: false; problems: string[] } {
  return { ok: false, problems: [`${TOKENS_FILE_VAR} ${path}: ${why}`] };
}

/** A warning when others may read the file (only a warning: secrets are often mounted 0444). */
export function tokenFileModeWarning(path: string): string | undefined {
  let mode: number;
  try {
    mode = statSync(path).mode & 0o777;
  } catch {
    return undefined; // reading it says what is wrong
  }
  const who = mode & 0o004 ? 'every user' : mode & 0o040 ? 'its group' : undefined;
  if (!who) return undefined;
  return (
    `${TOKENS_FILE_VAR} ${path} is readable by ${who} ` +
    `(mode ${mode.toString(8).padStart(4, '0')}): it holds API tokens; make it 0600 or 0400 ` +
    '(a Kubernetes Secret: defaultMode 0400)'
  );
}
