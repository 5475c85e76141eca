// GET /assets/app.css and /assets/app.js: the pages' only style and script.
import type { FastifyInstance } from 'fastify';
import { ACTIONS_CSS, APP_CSS, APP_JS } from '../assets.ts';

export function registerAssets(app: FastifyInstance): void {
  app.get('/assets/app.css', async (_req, reply) =>
    reply.type('text/css; charset=utf-8').header('cache-control', 'public, max-age=300').send(APP_CSS),
  );
  app.get('/assets/actions.css', async (_req, reply) =>
    reply.type('text/css; charset=utf-8').header('cache-control', 'public, max-age=300').send(ACTIONS_CSS),
  );
  app.get('/assets/app.js', async (_req, reply) =>
    reply.type('text/javascript; charset=utf-8').header('cache-control', 'public, max-age=300').send(APP_JS),
  );
}
