// What every route of the dashboard gets: the app context, the CSRF issuer, the mode, and helpers to
// parse the shared query parameters with errors that name the parameter.
import type { FastifyReply } from 'fastify';
import type { AppContext } from '../app.ts';
import { isValidOrgKey } from '../keys.ts';
import type { Csrf } from './csrf.ts';
import type { PageContext } from './views/layout.ts';
import type { Html } from './html.ts';

export interface DashboardDeps {
  ctx: AppContext;
  csrf: Csrf;
  readOnly: boolean;
  liveIntervalMs: number;
  /** Most open /api/live streams at once. */
  liveMaxConnections: number;
}

export class DashboardError extends Error {
  readonly statusCode: number;
  readonly code: string;
  constructor(statusCode: number, code: string, message: string) {
    super(message);
    this.statusCode = statusCode;
    this.code = code;
  }
}

export function badRequest(message: string): DashboardError {
  return new DashboardError(400, 'bad-request', message);
}

export function notFound(message: string): DashboardError {
  return new DashboardError(404, 'not-found', message);
}

export function pageContext(deps: DashboardDeps, path: string): PageContext {
  return { csrfToken: deps.csrf.issue(), readOnly: deps.readOnly, path };
}

/** Pages forbid inline scripts and any other origin: the only script is /assets/app.js. */
export const PAGE_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

export function sendPage(reply: FastifyReply, page: Html): FastifyReply {
  return reply
    .type('text/html; charset=utf-8')
    .header('content-security-policy', PAGE_CSP)
    .header('cache-control', 'no-store')
    .send(page.value);
}

/** An organization named in a URL or a filter: must be one this dashboard has tokens for. */
export function knownOrg(deps: DashboardDeps, org: string, param = 'org'): string {
  if (!isValidOrgKey(org) || !deps.ctx.config.orgs.includes(org)) {
    throw badRequest(
      `${param}: unknown organization '${org.slice(0, 64)}' (known: ${deps.ctx.config.orgs.join(', ') || 'none'})`,
    );
  }
  return org;
}

export function learnerIdParam(value: string, param = 'learner id'): number {
  if (!/^\d{1,15}$/.test(value) || Number(value) < 1) {
    throw badRequest(`${param}: expected a positive whole number, got '${value.slice(0, 20)}'`);
  }
  return Number(value);
}
