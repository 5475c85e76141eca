// The field builders of the environment's schema (config-schema.ts): each parses one variable;
// its error names the variable, its form and the bad value (never a secret's).
import * as z from 'zod';
import { parseDuration, rateMessage, readRate } from './duration.ts';
import { readTokenEntry, tokenRef, TOKEN_ENTRY_FORM, type TokenRef } from './token-ref.ts';

export const MIN_DISTINCT_TOKEN_CHARS = 8;

/**
 * A dashboard token an attacker could guess: fewer than 8 distinct characters, or a low Shannon
 * entropy (under 3 bits per character, e.g. one character repeated most of the time).
 */
export function isWeakToken(token: string): boolean {
  const counts = new Map<string, number>();
  for (const c of token) counts.set(c, (counts.get(c) ?? 0) + 1);
  if (counts.size < MIN_DISTINCT_TOKEN_CHARS) return true;
  const n = [...token].length;
  let bits = 0;
  for (const k of counts.values()) bits -= (k / n) * Math.log2(k / n);
  return bits < 3;
}

/**
 * A URL's password replaced by `***`, even in a URL that does not parse (`redis//:pw@host`,
 * `http://user:p/w@host`): everything from the user's `:` to the last `@` is hidden (all of the
 * user part when it has no `:`, since Redis may take a lone user part as the password).
 */
export function maskUrlPassword(text: string): string {
  const at = text.lastIndexOf('@');
  if (at < 0) return text;
  const slashes = text.indexOf('//');
  const from = slashes >= 0 && slashes < at ? slashes + 2 : 0;
  const userinfo = text.slice(from, at);
  const colon = userinfo.indexOf(':');
  return `${text.slice(0, from)}${colon >= 0 ? `${userinfo.slice(0, colon)}:***` : '***'}${text.slice(at)}`;
}

/** Formats the value of a bad variable for a message: quoted, shortened, never for secrets. */
export function shown(value: string): string {
  const v = value.length > 60 ? `${value.slice(0, 57)}...` : value;
  return `'${v}'`;
}

export const rateField = (name: string, fallback: string) =>
  z
    .string()
    .default(fallback)
    .transform((text, ctx) => {
      // The same parser and message as `limits set` and the dashboard (duration.ts readRate).
      const read = readRate(text);
      if (!read.ok) {
        ctx.addIssue({ code: 'custom', message: rateMessage(name, text, read.why) });
        return z.NEVER;
      }
      return read.rate;
    });

export const intField = (name: string, fallback: number, min: number, max: number) =>
  z
    .string()
    .default(String(fallback))
    .transform((text, ctx) => {
      const n = Number(text.trim());
      if (!/^\s*\d+\s*$/.test(text) || !Number.isSafeInteger(n) || n < min || n > max) {
        ctx.addIssue({
          code: 'custom',
          message: `${name}: expected a whole number from ${min} to ${max}, got ${shown(text)}`,
        });
        return z.NEVER;
      }
      return n;
    });

/** A duration variable; with `zeroTurnsOff`, a plain `0` is accepted too (the feature is off). */
export const durationField = (name: string, fallback: string, zeroTurnsOff = false) =>
  z
    .string()
    .default(fallback)
    .transform((text, ctx) => {
      const ms = zeroTurnsOff && text.trim() === '0' ? 0 : parseDuration(text);
      if (ms === undefined) {
        ctx.addIssue({
          code: 'custom',
          message: `${name}: expected a duration like 30s or 1500ms (units ms, s, m, h, d)${zeroTurnsOff ? ', or 0 for none' : ''}, got ${shown(text)}`,
        });
        return z.NEVER;
      }
      return ms;
    });

/** "90%" or "0.9": a share of Redis's maxmemory, from 1% to 100%. */
export function parseHighWater(text: string): number | undefined {
  const t = text.trim();
  const pct = /^(\d+(?:\.\d+)?)\s*%$/.exec(t);
  const ratio = pct ? Number(pct[1]) / 100 : /^(?:0?\.\d+|0|1(?:\.0*)?)$/.test(t) ? Number(t) : NaN;
  return Number.isFinite(ratio) && ratio >= 0.01 && ratio <= 1 ? ratio : undefined;
}

export const boolField = (name: string) =>
  z
    .string()
    .optional()
    .transform((text, ctx) => {
      if (text === undefined) return undefined;
      const t = text.trim().toLowerCase();
      if (['1', 'true', 'yes', 'on'].includes(t)) return true;
      if (['0', 'false', 'no', 'off'].includes(t)) return false;
      ctx.addIssue({ code: 'custom', message: `${name}: expected true or false, got ${shown(text)}` });
      return z.NEVER;
    });

/** The form of a Redis URL, for the message that refuses one. */
export const REDIS_URL_FORM = 'redis://[user:password@]host:6379[/db], or rediss://... for TLS';

export const urlField = (name: string, protocols: string[], form?: string) =>
  z.string().transform((text, ctx) => {
    let url: URL | undefined;
    try {
      url = new URL(text);
    } catch {
      url = undefined;
    }
    if (!url || !protocols.includes(url.protocol)) {
      ctx.addIssue({
        code: 'custom',
        message:
          `${name}: expected a ${protocols.map((p) => p.replace(':', '')).join(' or ')} URL, got ${shown(maskUrlPassword(text))}` +
          (form ? ` (the form: ${form})` : ''),
      });
      return z.NEVER;
    }
    return text.replace(/\/+$/, '');
  });

export const tokensField = z
  .string()
  .default('')
  .transform((text, ctx) => {
    const tokens: TokenRef[] = [];
    const seen = new Set<string>();
    const parts = text
      .split(',')
      .map((p) => p.trim())
      .filter((p) => p.length > 0);
    parts.forEach((part, i) => {
      // Never echo the pair: it holds the secret. Name its position and the org key only.
      const entry = readTokenEntry(part);
      if (!entry.ok) {
        ctx.addIssue({
          code: 'custom',
          message:
            `LEARNER_API_TOKENS: entry ${i + 1} is not ${TOKEN_ENTRY_FORM} ` +
            `(like acme:TOKEN1,acme:TOKEN2,beta:TOKEN3)` +
            (entry.why === 'empty-token' ? ` (org '${entry.org}' has an empty token)` : ''),
        });
        return;
      }
      if (seen.has(entry.secret)) {
        ctx.addIssue({
          code: 'custom',
          message: `LEARNER_API_TOKENS: entry ${i + 1} (org '${entry.org}') repeats a token given earlier`,
        });
        return;
      }
      seen.add(entry.secret);
      tokens.push(tokenRef(entry.org, entry.secret));
    });
    return tokens;
  });

export const pathField = (name: string) =>
  z.string().refine((d) => d.trim().length > 0 && !/[\0\r\n]/.test(d), {
    error: (iss) => `${name}: expected a file path, got ${shown(String(iss.input))}`,
  });

/** A dashboard token: 16+ characters, no spaces, not weak; errors never show the value. */
export function dashboardTokenField(name: string) {
  return z
    .string()
    .refine((t) => t.length >= 16 && !/\s/.test(t), {
      error: `${name}: expected at least 16 characters without spaces (the value is not shown)`,
    })
    .refine((t) => !isWeakToken(t), {
      error: `${name}: too weak: expected at least ${MIN_DISTINCT_TOKEN_CHARS} distinct characters and no long repeats (generate one with: openssl rand -hex 24; the value is not shown)`,
    })
    .optional();
}

/** A URL's scheme ('' when it does not parse). */
export function urlProtocol(text: string): string {
  try {
    return new URL(text).protocol;
  } catch {
    return '';
  }
}
