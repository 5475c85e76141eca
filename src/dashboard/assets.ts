// The stylesheets and scripts of the pages, served from /assets: no build step, and same-origin files
// let the Content-Security-Policy forbid inline scripts. They are real files under public/ so that ESLint
// (with browser globals) and Prettier see them; the scripts are plain ES2017 for any browser. Read once,
// when the dashboard is loaded: scripts/copy-assets.mjs puts them beside the compiled JavaScript too.
import { readFileSync } from 'node:fs';

function publicFile(name: string): string {
  return readFileSync(new URL(`./public/${name}`, import.meta.url), 'utf8');
}

/** /assets/app.css: the style of every page. */
export const APP_CSS = publicFile('app.css');
/** /assets/app.js: live updates of the overview, and the retries of the failures and learner pages. */
export const APP_JS = publicFile('app.js');
/** /assets/actions.css: the retry dialog, the notes on outcomes a retry cannot help, the change log page. */
export const ACTIONS_CSS = publicFile('actions.css');
/** /assets/controls.css: the controls page's own style. */
export const CONTROLS_CSS = publicFile('controls.css');
/** /assets/controls.js: posts a change with the page's CSRF token, then reloads that organization's section. */
export const CONTROLS_JS = publicFile('controls.js');
/** /assets/learner.js: the learner page's "Move ahead of the queue": posts the move with the page's CSRF token. */
export const LEARNER_JS = publicFile('learner.js');
