// Authentication: the operator's and the viewer's tokens, as Bearer or basic-auth password,
// compared in constant time; and the throttle of failed logins.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { httpAnswer } from '../core/errors.ts';
import { presentedCredential, sameSecret } from '../core/http-access.ts';
import { dashboardActor } from '../limiter/control-log.ts';

export const REALM = 'learner-transfer dashboard';

/**
 * Who a request is: the operator (DASHBOARD_TOKEN, or anyone on a loopback dashboard without one)
 * acts; the viewer (DASHBOARD_READ_TOKEN) sees every page and may change nothing.
 */
export type Role = 'operator' | 'viewer';

/** The id of each credential in the change log: a name, never the token or a hash of it. */
export const TOKEN_IDS = { operator: 'operator', viewer: 'viewer', none: 'local' } as const;

const roles = new WeakMap<FastifyRequest, { role: Role; tokenId: string }>();

/** Set by the server's onRequest hook once the credential is checked. */
export function setRole(req: FastifyRequest, role: Role, tokenId: string): void {
  roles.set(req, { role, tokenId });
}

/** The request's role: `operator` unless the hook found the viewer token. */
export function roleOf(req: FastifyRequest): Role {
  return roles.get(req)?.role ?? 'operator';
}

/**
 * Which token a presented credential is, in constant time: both are compared whatever the first
 * says, so which one matched does not show in the timing either.
 */
export function matchToken(given: string, operator: string, viewer: string | undefined): Role | undefined {
  const isOperator = sameSecret(given, operator);
  const isViewer = viewer !== undefined && sameSecret(given, viewer);
  if (isOperator) return 'operator';
  if (isViewer) return 'viewer';
  return undefined;
}

export function refuseViewer(reply: FastifyReply): FastifyReply {
  const refused = httpAnswer('LT_HTTP_VIEWER');
  return reply.code(refused.status).header('cache-control', 'no-store').send({
    error: refused.error,
    message:
      'this is the viewer token (DASHBOARD_READ_TOKEN): it may look at every page and change nothing; act with DASHBOARD_TOKEN',
  });
}

export function isAuthorized(request: FastifyRequest, token: string | undefined): boolean {
  if (token === undefined) return true;
  const given = presentedCredential(request.headers.authorization);
  return given !== undefined && sameSecret(given, token);
}

export function refuseUnauthorized(reply: FastifyReply): FastifyReply {
  const refused = httpAnswer('LT_HTTP_UNAUTHORIZED');
  return reply
    .code(refused.status)
    .header('www-authenticate', `Basic realm="${REALM}", charset="UTF-8"`)
    .header('cache-control', 'no-store')
    .send({
      error: refused.error,
      message: 'DASHBOARD_TOKEN (or DASHBOARD_READ_TOKEN to view) required (Bearer, or basic auth password)',
    });
}

/** Failed logins per client address before the throttle answers 429. */
export const LOGIN_FAILURES_ALLOWED = 5;
/** The longest a throttled client waits. */
export const LOGIN_MAX_DELAY_MS = 15 * 60_000;
const TRACKED_CLIENTS = 10_000;

/**
 * Throttles guessing of DASHBOARD_TOKEN per client address: from the 5th wrong credential the
 * address is refused, whatever it presents, for a delay that doubles (docs/security.md).
 */
export class LoginThrottle {
  readonly #clients = new Map<string, { failures: number; until: number }>();
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  /** Milliseconds this client must still wait, or 0. */
  waitMs(client: string): number {
    const c = this.#clients.get(client);
    return c ? Math.max(0, c.until - this.#now()) : 0;
  }

  failed(client: string): void {
    const c = this.#clients.get(client) ?? { failures: 0, until: 0 };
    this.#clients.delete(client); // re-inserted last: the Map's order is the eviction order
    c.failures += 1;
    if (c.failures >= LOGIN_FAILURES_ALLOWED) {
      const delay = Math.min(
        LOGIN_MAX_DELAY_MS,
        1000 * 2 ** Math.min(30, c.failures - LOGIN_FAILURES_ALLOWED),
      );
      c.until = this.#now() + delay;
    }
    this.#clients.set(client, c);
    if (this.#clients.size > TRACKED_CLIENTS) {
      const oldest = this.#clients.keys().next().value;
      if (oldest !== undefined) this.#clients.delete(oldest);
    }
  }

  succeeded(client: string): void {
    this.#clients.delete(client);
  }
}

export function refuseThrottled(reply: FastifyReply, waitMs: number): FastifyReply {
  const seconds = Math.max(1, Math.ceil(waitMs / 1000));
  const refused = httpAnswer('LT_HTTP_TOO_MANY_FAILURES');
  return reply
    .code(refused.status)
    .header('retry-after', String(seconds))
    .header('cache-control', 'no-store')
    .send({ error: refused.error, message: `too many failed logins: retry in ${seconds} s` });
}

/** The user name of a basic-auth header, for the change log. */
function basicUser(header: string | undefined): string | undefined {
  if (!header || !/^basic /i.test(header)) return undefined;
  const decoded = Buffer.from(header.slice(6).trim(), 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  // Control characters would only garble the log: a user name is printable.
  return colon > 0 ? decoded.slice(0, Math.min(colon, 64)).replace(/[^\x20-\x7e]/g, '?') : undefined;
}

/** Who asked, for the change log: the token's id, the basic-auth user name, the address. */
export function actorOf(req: FastifyRequest): string {
  return dashboardActor(
    basicUser(req.headers.authorization),
    req.ip,
    roles.get(req)?.tokenId ?? TOKEN_IDS.none,
  );
}
