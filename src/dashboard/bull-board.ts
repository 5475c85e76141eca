// bull-board under /queues, behind the dashboard's authentication and read-only: a retry must go
// through the outcome store (POST /api/retry), or the record, run counters and failures index
// would not follow the job.
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../app/context.ts';

export const BULL_BOARD_PATH = '/queues';

/**
 * bull-board's pages and API: only this origin ('unsafe-inline' for its inline style attributes;
 * no inline or outside script, font, image or connection).
 */
export const BULL_BOARD_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
  "font-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'self'; form-action 'self'; " +
  "object-src 'none'";

/**
 * bull-board's index.ejs links its fonts from fonts.googleapis.com (not configurable): every
 * element naming an outside host is dropped, so the browser contacts no other host.
 */
export function localOnlyHtml(html: string): string {
  return html.replace(
    /<(?:link|script|img)\b[^>]*\b(?:href|src)=["']?(?:https?:)?\/\/[^>]*>(?:<\/script>)?/gi,
    '',
  );
}

/**
 * A link back to the dashboard on bull-board's page (its own `miscLinks` hide behind a menu
 * icon): outside the React root, which never touches it, styled inline (the CSP allows it here).
 */
export const DASHBOARD_LINK =
  '<a id="lt-dashboard-link" href="/" style="position:fixed;left:0.75rem;bottom:0.75rem;z-index:1000;' +
  'padding:0.35rem 0.75rem;border:1px solid #8c959f;border-radius:6px;background:#fff;color:#0969da;' +
  'font:14px system-ui,sans-serif;text-decoration:none">&larr; learner-transfer dashboard</a>';

export function withDashboardLink(html: string): string {
  if (html.includes('id="lt-dashboard-link"')) return html;
  const body = /<body[^>]*>/i.exec(html);
  if (!body) return html;
  const at = body.index + body[0].length;
  return html.slice(0, at) + DASHBOARD_LINK + html.slice(at);
}

export async function mountBullBoard(app: FastifyInstance, ctx: AppContext): Promise<void> {
  const serverAdapter = new FastifyAdapter();
  serverAdapter.setBasePath(BULL_BOARD_PATH);
  createBullBoard({
    queues: ctx.config.orgs.map(
      (org) =>
        new BullMQAdapter(ctx.queues.get(org) as unknown as ConstructorParameters<typeof BullMQAdapter>[0], {
          readOnlyMode: true,
          displayName: `transfers ${org}`,
        }),
    ),
    // @bull-board/fastify pins its own copy of @bull-board/api: same shapes, separate private fields.
    serverAdapter: serverAdapter as unknown as Parameters<typeof createBullBoard>[0]['serverAdapter'],
    options: {
      uiConfig: {
        boardTitle: 'learner-transfer queues',
        miscLinks: [{ text: 'Dashboard', url: '/' }],
        // No Redis version, port, kernel or memory figures (its /api/redis/stats answers 403).
        hideRedisDetails: true,
        hideDocsLink: true,
      },
    },
  });
  await app.register(serverAdapter.registerPlugin(), { prefix: BULL_BOARD_PATH });
}
