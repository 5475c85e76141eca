// Who may reach an HTTP surface (the dashboard, bull-board, the worker's /metrics): the
// credential, compared in constant time, and the Host rule against DNS rebinding.
import { createHash, timingSafeEqual } from 'node:crypto';
import { httpAnswer } from './errors.ts';

/** Paths served without authentication: they reveal nothing and orchestrators probe them bare. */
export const PUBLIC_PATHS: ReadonlySet<string> = new Set(['/healthz', '/readyz']);

function digest(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

export function sameSecret(given: string, expected: string): boolean {
  return timingSafeEqual(digest(given), digest(expected));
}

/** The credential a request presents: the Bearer token or the basic-auth password. */
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

const LOOPBACK_HOSTS = /^(localhost|127\.\d+\.\d+\.\d+|\[::1\])(:\d+)?$/i;

/**
 * Without a token the server listens on loopback only, but a page from another site could reach
 * it by DNS rebinding; such requests carry that site's name in Host.
 */
export function isLoopbackHost(host: string | undefined): boolean {
  return host !== undefined && LOOPBACK_HOSTS.test(host);
}

/** What a refused Host name gets, from the dashboard and from the worker's /metrics alike. */
export const FORBIDDEN_HOST = {
  error: httpAnswer('LT_HTTP_FORBIDDEN_HOST').error,
  message: 'set DASHBOARD_TOKEN to serve other host names',
} as const;

/**
 * The Host rule of every HTTP surface: with a token the token decides; without one only
 * loopback names are served (DNS rebinding, above). The health probes are exempt.
 */
export function isHostAllowed(path: string, host: string | undefined, token: string | undefined): boolean {
  return token !== undefined || PUBLIC_PATHS.has(path) || isLoopbackHost(host);
}

export function isLoopbackAddress(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}
