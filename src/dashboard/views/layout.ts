// The page frame: navigation, the CSRF token for the page's script, and the stylesheet and script
// from /assets (same origin, so the CSP can forbid every inline script).
import { html, type Html } from '../html.ts';

export interface PageContext {
  csrfToken: string;
  /** No button that changes anything (a --read-only dashboard, or the viewer token). */
  readOnly: boolean;
  /** Why, shown in the header: `read-only` (the process) or `viewer` (the token). */
  badge?: string | undefined;
  /** Path of the current page, to mark the active link. */
  path: string;
}

const LINKS: [string, string][] = [
  ['/', 'Overview'],
  ['/failures', 'Failures'],
  ['/controls', 'Controls'],
  ['/changes', 'Changes'],
  ['/queues', 'Queues'],
  ['/metrics', 'Metrics'],
];

export function layout(page: PageContext, title: string, body: Html): Html {
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta name="csrf-token" content="${page.csrfToken}" />
        <title>${title} · learner-transfer</title>
        <link rel="stylesheet" href="/assets/app.css" />
        <link rel="stylesheet" href="/assets/actions.css" />
        <script src="/assets/app.js" defer></script>
      </head>
      <body data-read-only="${page.readOnly ? 'true' : 'false'}">
        <header>
          <strong>learner-transfer</strong>
          <nav>
            ${LINKS.map(
              ([href, label]) =>
                html`<a href="${href}" ${page.path === href ? html` aria-current="page"` : ''}>${label}</a>`,
            )}
          </nav>
          ${page.readOnly ? html`<span class="badge" id="role-badge">${page.badge ?? 'read-only'}</span>` : ''}
        </header>
        <main>${body}</main>
      </body>
    </html>`;
}
