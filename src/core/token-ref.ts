// One token of this process: its organization, its non-secret id and the secret, read alike
// from LEARNER_API_TOKENS and from its file.
import { createHash } from 'node:crypto';
import { isValidOrgKey } from './keys.ts';

export interface TokenRef {
  /** Organization key the token belongs to: transfers made with it land in this organization. */
  org: string;
  /**
   * Non-secret id of the token (a short SHA-256 fingerprint): what Redis, logs and reports see.
   */
  id: string;
  /** The secret. Lives only in this process's memory: never in Redis, logs, reports or errors. */
  readonly secret: string;
}

export function tokenFingerprint(secret: string): string {
  return createHash('sha256').update(secret).digest('hex').slice(0, 12);
}

/** The form of an entry, for messages (the example shows the form, never a real token). */
export const TOKEN_ENTRY_FORM = 'ORG:TOKEN with ORG made of letters, digits, _ or -';

/** One `ORG:TOKEN` entry read. A refusal never quotes the entry (it holds the secret). */
export type TokenEntry =
  | { ok: true; org: string; secret: string }
  | { ok: false; why: 'not-a-pair' }
  | { ok: false; why: 'empty-token'; org: string };

export function readTokenEntry(text: string): TokenEntry {
  const colon = text.indexOf(':');
  const org = colon > 0 ? text.slice(0, colon).trim() : '';
  const secret = colon > 0 ? text.slice(colon + 1).trim() : '';
  if (!isValidOrgKey(org)) return { ok: false, why: 'not-a-pair' };
  if (secret.length === 0) return { ok: false, why: 'empty-token', org };
  return { ok: true, org, secret };
}

/** A frozen TokenRef whose secret stays out of JSON.stringify and util.inspect by accident. */
export function tokenRef(org: string, secret: string): TokenRef {
  const ref = { org, id: tokenFingerprint(secret) } as TokenRef;
  Object.defineProperty(ref, 'secret', { value: secret, enumerable: false });
  return Object.freeze(ref);
}
