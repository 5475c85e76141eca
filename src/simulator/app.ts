// The fastify app: record on arrival, the "service down" fault, a lenient JSON body parser, and
// errors in the spec's shape for whatever fastify itself refuses.
import Fastify, { type FastifyInstance } from 'fastify';
import { LearnerTransferError } from '../core/errors.ts';
import { bodies } from './bodies.ts';
import type { SimContext } from './context.ts';
import type { SimulatorOptions } from './types.ts';
import { emit, resetSocket } from './respond.ts';
import { registerListRoute } from './routes-list.ts';
import { registerTransferRoute } from './routes-transfer.ts';

export function buildApp(
  ctx: SimContext,
  logger: boolean,
  https?: SimulatorOptions['https'],
): FastifyInstance {
  const common = { logger, routerOptions: { ignoreTrailingSlash: true } };
  // HTTPS: the same app over TLS (fastify types an HTTPS instance apart; the routes use neither).
  const app = https
    ? (Fastify({
        ...common,
        https: {
          cert: https.cert,
          key: https.key,
          ...(https.ca ? { ca: https.ca } : {}),
          ...(https.requestCert ? { requestCert: true, rejectUnauthorized: true } : {}),
        },
      }) as unknown as FastifyInstance)
    : Fastify(common);

  app.addHook('onRequest', async (request, reply) => {
    const entry = ctx.log.begin(request.raw);
    // Known tokens (revoked ones too) are named in the record from the start, whatever happens next.
    const caller = ctx.tokens.caller(request.headers.authorization);
    if (caller.info) {
      entry.org = caller.info.org.key;
      entry.tokenLabel = caller.info.label;
    }
    if (ctx.faults.down) {
      // Down: the connection dies on arrival; nothing is counted, nothing happens.
      entry.status = 'reset';
      entry.result = 'down';
      entry.respondedAt = Date.now();
      resetSocket(request, reply);
    }
  });

  // The transfer's body is `{}`: an empty body sent as application/json must not get fastify's 400.
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    const text = String(body).trim();
    if (text === '') return done(null, {});
    try {
      done(null, JSON.parse(text));
    } catch {
      done(
        new LearnerTransferError('LT_SIMULATOR_BAD_JSON', 'The request body is not valid JSON'),
        undefined,
      );
    }
  });
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, _body, done) => done(null, undefined));

  app.setErrorHandler((error: { statusCode?: number; message?: string }, request, reply) => {
    const entry = ctx.log.of(request.raw);
    const status = error.statusCode ?? 500;
    if (status >= 400 && status < 500) {
      emit(entry, request, reply, {
        kind: 'json',
        status,
        body: bodies.badRequest(error.message ?? 'Bad request'),
        result: 'bad-request',
      });
    } else {
      request.log.error({ err: error }, 'simulator handler failed');
      emit(entry, request, reply, {
        kind: 'json',
        status: 500,
        body: bodies.internal(),
        result: 'server-error',
      });
    }
    return reply;
  });

  app.setNotFoundHandler((request, reply) => {
    const entry = ctx.log.of(request.raw);
    const path = entry.path;
    emit(entry, request, reply, {
      kind: 'json',
      status: 404,
      body: bodies.routeNotFound(request.method, path),
    });
    return reply;
  });

  registerListRoute(app, ctx);
  registerTransferRoute(app, ctx);
  return app;
}
