// The dashboard's Fastify app: authentication and CSRF on the root instance (so they cover
// bull-board too), security headers, the pages and their JSON API, /metrics, bull-board.
import { readFileSync } from 'node:fs';
import Fastify, { type FastifyError, type FastifyInstance } from 'fastify';
import type { AppContext } from '../app/context.ts';
import { httpAnswer, LearnerTransferError } from '../core/errors.ts';
import { FORBIDDEN_HOST, isHostAllowed, presentedCredential, PUBLIC_PATHS } from '../core/http-access.ts';
import {
  LoginThrottle,
  matchToken,
  refuseThrottled,
  refuseUnauthorized,
  refuseViewer,
  roleOf,
  setRole,
  TOKEN_IDS,
} from './auth.ts';
import {
  BULL_BOARD_CSP,
  BULL_BOARD_PATH,
  localOnlyHtml,
  mountBullBoard,
  withDashboardLink,
} from './bull-board.ts';
import { Csrf, CSRF_HEADER, isStateChanging } from './csrf.ts';
import { DashboardError, type DashboardDeps } from './deps.ts';
import { escapeHtml } from './html.ts';
import { registerMetrics } from './gauges.ts';
import { registerAssets } from './routes/assets.ts';
import { registerChanges } from './routes/changes.ts';
import { registerControls } from './routes/controls.ts';
import { registerFailures } from './routes/failures.ts';
import { registerHealth } from './routes/health.ts';
import { registerLearner } from './routes/learner.ts';
import { registerLive } from './routes/live.ts';
import { registerOverview } from './routes/overview.ts';
import { registerRetry } from './routes/retry.ts';
import { registerCancel } from './routes/cancel.ts';
import { registerApprove } from './routes/approve.ts';

export interface DashboardOptions {
  /** Hide and refuse retries. */
  readOnly?: boolean;
  /** Default: DASHBOARD_TOKEN from the config. Undefined: no authentication (loopback only). */
  token?: string | undefined;
  /** The viewer's token (every page, no action). Default: DASHBOARD_READ_TOKEN from the config. */
  readToken?: string | undefined;
  /** Interval of the live (SSE) overview. */
  liveIntervalMs?: number;
  /** The live overview reads the whole fleet this often, the watched pages between. */
  liveFleetEveryMs?: number;
  /** Mount bull-board under /queues (default true). */
  bullBoard?: boolean;
  /** A fixed CSRF secret (tests); default a random one per process. */
  csrfSecret?: Buffer;
  /** Most open /api/live streams at once; more get 503 (default LIVE_MAX_CONNECTIONS). */
  liveMaxConnections?: number;
  /** Serve HTTPS with this PEM certificate and key. Default: DASHBOARD_TLS_CERT/_KEY, if set. */
  tls?: { cert: string | Buffer; key: string | Buffer } | undefined;
  /** Failed-login throttle (tests pass their own clock). */
  loginThrottle?: LoginThrottle;
}

/** Default cap of concurrent /api/live streams: each costs a socket, not Redis reads. */
export const LIVE_MAX_CONNECTIONS = 100;

function tlsFromConfig(ctx: AppContext): DashboardOptions['tls'] {
  const { dashboardTlsCert: cert, dashboardTlsKey: key } = ctx.config;
  if (!cert || !key) return undefined;
  const read = (path: string, name: string) => {
    try {
      return readFileSync(path);
    } catch (err) {
      throw new LearnerTransferError(
        'LT_CONFIG_INVALID',
        `${name}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
        { cause: err },
      );
    }
  };
  return { cert: read(cert, 'DASHBOARD_TLS_CERT'), key: read(key, 'DASHBOARD_TLS_KEY') };
}

function pathOf(url: string): string {
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
}

export async function buildDashboard(
  ctx: AppContext,
  options: DashboardOptions = {},
): Promise<FastifyInstance> {
  const token = 'token' in options ? options.token : ctx.config.dashboardToken;
  const readToken = 'readToken' in options ? options.readToken : ctx.config.dashboardReadToken;
  if (readToken !== undefined && (token === undefined || readToken === token)) {
    // The config refuses both already; options from code are held to the same rule.
    throw new LearnerTransferError(
      'LT_CONFIG_INVALID',
      token === undefined
        ? 'DASHBOARD_READ_TOKEN: needs DASHBOARD_TOKEN beside it (the operator token)'
        : 'DASHBOARD_READ_TOKEN, DASHBOARD_TOKEN: the same value; the viewer token must differ',
    );
  }
  const deps: DashboardDeps = {
    ctx,
    csrf: new Csrf(options.csrfSecret),
    readOnly: options.readOnly ?? false,
    liveIntervalMs: options.liveIntervalMs ?? 2000,
    liveFleetEveryMs: options.liveFleetEveryMs,
    liveMaxConnections: options.liveMaxConnections ?? LIVE_MAX_CONNECTIONS,
  };
  const tls = 'tls' in options ? options.tls : tlsFromConfig(ctx);
  const throttle = options.loginThrottle ?? new LoginThrottle();
  // Open event streams would otherwise hold close() until every browser goes away.
  const app = Fastify({
    logger: false,
    forceCloseConnections: true,
    bodyLimit: 1_048_576,
    ...(tls ? { https: { cert: tls.cert, key: tls.key } } : {}),
  }) as unknown as FastifyInstance;

  guardRequests(app, deps, { operator: token, viewer: readToken }, throttle);
  secureResponses(app);
  answerErrors(app, ctx);

  registerHealth(app, deps);
  registerAssets(app);
  registerMetrics(app, ctx);
  registerOverview(app, deps);
  registerFailures(app, deps);
  registerLearner(app, deps);
  registerRetry(app, deps);
  registerCancel(app, deps);
  registerApprove(app, deps);
  registerControls(app, deps);
  registerChanges(app, deps);
  registerLive(app, deps);
  if (options.bullBoard ?? true) await mountBullBoard(app, ctx);
  await app.ready();
  return app;
}

/**
 * Every request: a Host the dashboard answers to (DNS rebinding), then the token unless the path
 * is public, which gives its role; the viewer is refused every change (bull-board's too: this
 * hook runs for every route of the root instance); then the CSRF header on a change.
 */
function guardRequests(
  app: FastifyInstance,
  deps: DashboardDeps,
  tokens: { operator: string | undefined; viewer: string | undefined },
  throttle: LoginThrottle,
): void {
  const { operator, viewer } = tokens;
  app.addHook('onRequest', async (req, reply) => {
    const path = pathOf(req.url);
    // Without a token only loopback names are served (DNS rebinding: see auth.ts).
    if (!isHostAllowed(path, req.headers.host, operator))
      return reply.code(httpAnswer('LT_HTTP_FORBIDDEN_HOST').status).send(FORBIDDEN_HOST);
    if (PUBLIC_PATHS.has(path)) return;
    if (operator !== undefined) {
      // Throttled per client address: a refused client is not even checked (see LoginThrottle).
      const wait = throttle.waitMs(req.ip);
      if (wait > 0) return refuseThrottled(reply, wait);
      const given = presentedCredential(req.headers.authorization);
      if (given === undefined) return refuseUnauthorized(reply);
      const role = matchToken(given, operator, viewer);
      if (role === undefined) {
        throttle.failed(req.ip);
        return refuseUnauthorized(reply);
      }
      throttle.succeeded(req.ip);
      setRole(req, role, TOKEN_IDS[role]);
    } else {
      setRole(req, 'operator', TOKEN_IDS.none);
    }
    if (!isStateChanging(req.method)) return;
    if (roleOf(req) === 'viewer') return refuseViewer(reply);
    if (!deps.csrf.verify(req.headers[CSRF_HEADER] as string | undefined)) {
      const refused = httpAnswer('LT_HTTP_CSRF');
      return reply.code(refused.status).send({
        error: refused.error,
        message: `missing or invalid ${CSRF_HEADER} header (read it from the page's csrf-token meta, or GET /api/csrf)`,
      });
    }
  });
}

/** Security headers on every answer, and bull-board's page kept to this origin. */
function secureResponses(app: FastifyInstance): void {
  app.addHook('onSend', async (req, reply, payload) => {
    reply.header('x-content-type-options', 'nosniff');
    reply.header('referrer-policy', 'no-referrer');
    if (!reply.hasHeader('x-frame-options')) reply.header('x-frame-options', 'DENY');
    // Everything but the static assets names learners, runs or budgets: no browser or proxy keeps it.
    if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store');
    if (pathOf(req.url).startsWith(BULL_BOARD_PATH)) {
      // bull-board's page links fonts from an outside host: dropped, and a CSP allows only this origin.
      reply.header('content-security-policy', BULL_BOARD_CSP);
      if (typeof payload === 'string' && String(reply.getHeader('content-type')).includes('text/html'))
        return withDashboardLink(localOnlyHtml(payload));
    }
    return payload;
  });
}

/** An error: JSON to the API, a short page to a browser; a 5xx is logged, not detailed. */
function answerErrors(app: FastifyInstance, ctx: AppContext): void {
  app.setErrorHandler((err: FastifyError | DashboardError, req, reply) => {
    const status = err.statusCode && err.statusCode >= 400 && err.statusCode < 600 ? err.statusCode : 500;
    if (status >= 500)
      ctx.logger.error({ err: err.message, url: pathOf(req.url) }, 'dashboard request failed');
    const message = status >= 500 ? 'internal error (see the dashboard log)' : err.message;
    const code =
      err instanceof DashboardError
        ? err.answer
        : httpAnswer(status >= 500 ? 'LT_HTTP_INTERNAL' : 'LT_HTTP_BAD_REQUEST').error;
    if (pathOf(req.url).startsWith('/api/') || req.headers.accept?.includes('application/json')) {
      return reply.code(status).send({ error: code, message });
    }
    return reply
      .code(status)
      .type('text/html; charset=utf-8')
      .send(
        `<!doctype html><meta charset="utf-8"><title>${status}</title><p>${escapeHtml(message)}</p><p><a href="/">overview</a></p>`,
      );
  });
}
