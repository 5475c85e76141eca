// CSRF: a request that changes state carries a token only a page of this dashboard could read, an
// HMAC of its issue time under a per-process secret (stateless, valid a day). Browsers send
// basic-auth credentials on their own, so authentication alone does not stop a forged POST.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

export const CSRF_HEADER = 'x-csrf-token';
const MAX_AGE_MS = 24 * 3_600_000;

export class Csrf {
  readonly #secret: Buffer;
  constructor(secret: Buffer = randomBytes(32)) {
    this.#secret = secret;
  }

  #mac(issuedAt: string): string {
    return createHmac('sha256', this.#secret).update(`csrf:${issuedAt}`).digest('base64url');
  }

  issue(now = Date.now()): string {
    const issuedAt = String(now);
    return `${issuedAt}.${this.#mac(issuedAt)}`;
  }

  verify(token: string | undefined, now = Date.now()): boolean {
    if (!token) return false;
    const dot = token.indexOf('.');
    if (dot < 0) return false;
    const issuedAt = token.slice(0, dot);
    const mac = Buffer.from(token.slice(dot + 1));
    const time = Number(issuedAt);
    if (!/^\d{1,15}$/.test(issuedAt) || now - time > MAX_AGE_MS || time - now > 60_000) return false;
    const expected = Buffer.from(this.#mac(issuedAt));
    return mac.length === expected.length && timingSafeEqual(mac, expected);
  }
}

export function isStateChanging(method: string): boolean {
  return method !== 'GET' && method !== 'HEAD' && method !== 'OPTIONS';
}
