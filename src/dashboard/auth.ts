// Authentication: when DASHBOARD_TOKEN is set, every route but the health probes needs it, either as
// `Authorization: Bearer <token>` (scripts, Prometheus) or as the password of HTTP basic auth (browsers:
// the 401 carries WWW-Authenticate, so the browser asks). Compared in constant time over SHA-256
// digests, so neither the content nor the length of the token leaks through timing.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';

export const REALM = 'learner-transfer dashboard';

/** Paths served without authentication: they reveal nothing and orchestrators probe them bare. */
export const PUBLIC_PATHS: ReadonlySet<string> = new Set(['/healthz', '/readyz']);

function digest(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

export function sameSecret(given: string, expected: string): boolean {
  return timingSafeEqual(digest(given), digest(expected));
}

/** The credential a request presents: the Bearer token or the basic-auth password (any user name). */
export function presentedCredential(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const space = header.indexOf(' ');
  if (space < 0) return undefined;
  const scheme = header.slice(0, space).toLowerCase();
  const rest = header.slice(space + 1).trim();
  if (scheme === 'bearer') return rest;
  if (scheme === 'basic') {
    const decoded = Buffer.from(rest, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    return colon < 0 ? undefined : decoded.slice(colon + 1);
  }
  return undefined;
}

export function isAuthorized(request: FastifyRequest, token: string | undefined): boolean {
  if (token === undefined) return true;
  const given = presentedCredential(request.headers.authorization);
  return given !== undefined && sameSecret(given, token);
}

export function refuseUnauthorized(reply: FastifyReply): FastifyReply {
  return reply
    .code(401)
    .header('www-authenticate', `Basic realm="${REALM}", charset="UTF-8"`)
    .header('cache-control', 'no-store')
    .send({ error: 'unauthorized', message: 'DASHBOARD_TOKEN required (Bearer, or basic auth password)' });
}

const LOOPBACK_HOSTS = /^(localhost|127\.\d+\.\d+\.\d+|\[::1\])(:\d+)?$/i;

/**
 * Without a token the server only listens on loopback; a page from another site could still reach it
 * through DNS rebinding (its own name resolving to 127.0.0.1). Such requests carry that site's name in
 * Host, so without a token only loopback Host names are served.
 */
export function isLoopbackHost(host: string | undefined): boolean {
  return host !== undefined && LOOPBACK_HOSTS.test(host);
}

export function isLoopbackAddress(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}
