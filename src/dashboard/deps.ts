// What every route of the dashboard gets: the app context, the CSRF issuer, the mode, and
// parsers of the shared query parameters whose errors name the parameter.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { roleOf } from './auth.ts';
import type { AppContext } from '../app/context.ts';
import { httpAnswer, LearnerTransferError, type HttpErrorCode } from '../core/errors.ts';
import {
  isLearnerId,
  isReadableRunId,
  LEARNER_ID_EXPECTED,
  parseLearnerId,
  READABLE_RUN_ID_EXPECTED,
} from '../core/ids.ts';
import { isValidOrgKey } from '../core/keys.ts';
import type { Csrf } from './csrf.ts';
import type { PageContext } from './views/layout.ts';
import type { Html } from './html.ts';

export interface DashboardDeps {
  ctx: AppContext;
  csrf: Csrf;
  readOnly: boolean;
  liveIntervalMs: number;
  /** How often the live overview reads the whole fleet (default: routes/live.ts fleetEveryMs). */
  liveFleetEveryMs?: number | undefined;
  /** Most open /api/live streams at once. */
  liveMaxConnections: number;
}

/** An error the dashboard answers with: its status and JSON `error` are the catalogue's. */
export class DashboardError extends LearnerTransferError {
  declare readonly code: HttpErrorCode;
  declare readonly statusCode: number;
  constructor(code: HttpErrorCode, message: string) {
    super(code, message);
    this.name = 'DashboardError';
  }

  /** The `error` string of the JSON answer (docs/dashboard-api.md). */
  get answer(): string {
    return httpAnswer(this.code).error;
  }
}

export function badRequest(message: string): DashboardError {
  return new DashboardError('LT_HTTP_BAD_REQUEST', message);
}

export function notFound(message: string): DashboardError {
  return new DashboardError('LT_HTTP_NOT_FOUND', message);
}

/** Whether this request may not act: a --read-only dashboard, or the viewer token (auth.ts). */
export function mayNotAct(deps: DashboardDeps, req: FastifyRequest): boolean {
  return deps.readOnly || roleOf(req) === 'viewer';
}

export function pageContext(deps: DashboardDeps, path: string, req: FastifyRequest): PageContext {
  const viewer = roleOf(req) === 'viewer';
  return {
    csrfToken: deps.csrf.issue(),
    readOnly: deps.readOnly || viewer,
    ...(viewer ? { badge: 'viewer' } : deps.readOnly ? { badge: 'read-only' } : {}),
    path,
  };
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

/** A learner id in a URL, a filter or a body, by the CSV's and the CLI's rule (core/ids.ts). */
export function learnerIdParam(value: string, param = 'learner id'): number {
  const id = parseLearnerId(value);
  if (!isLearnerId(id))
    throw badRequest(`${param}: expected ${LEARNER_ID_EXPECTED}, got '${value.slice(0, 40)}'`);
  return id;
}

/**
 * Learners named as `org:learnerId`, grouped by organization in the order given; a malformed key,
 * an unknown organization or a bad id is a 400 naming `param`.
 */
export function learnersByOrg(
  deps: DashboardDeps,
  keys: readonly string[],
  param: string,
): Map<string, number[]> {
  const byOrg = new Map<string, number[]>();
  for (const key of keys) {
    const colon = key.lastIndexOf(':');
    if (colon < 1) throw badRequest(`${param}: '${key.slice(0, 80)}' is not org:learnerId`);
    const org = knownOrg(deps, key.slice(0, colon), param);
    const id = learnerIdParam(key.slice(colon + 1), param);
    const ids = byOrg.get(org);
    if (ids) ids.push(id);
    else byOrg.set(org, [id]);
  }
  return byOrg;
}

/** A run named in a filter: its id fits the rule, or it is a stored run of an earlier release. */
export async function runIdParam(deps: DashboardDeps, value: string, param = 'run'): Promise<string> {
  if (!(await isReadableRunId(value, (id) => deps.ctx.runs.exists(id)))) {
    throw badRequest(`${param}: expected ${READABLE_RUN_ID_EXPECTED}, got '${value.slice(0, 80)}'`);
  }
  return value;
}
