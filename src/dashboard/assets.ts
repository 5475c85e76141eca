// The pages' stylesheets and scripts, served from /assets: same-origin files let the CSP forbid
// inline scripts. Real files under public/, so ESLint and Prettier see them; plain ES2017, no
// build step (scripts/copy-assets.mjs puts them beside the compiled JavaScript).
import { readFileSync } from 'node:fs';

function publicFile(name: string): string {
  return readFileSync(new URL(`./public/${name}`, import.meta.url), 'utf8');
}

/** /assets/app.css: the style of every page. */
export const APP_CSS = publicFile('app.css');
/** /assets/app.js: the overview's live updates, the retries of the failures and learner pages. */
export const APP_JS = publicFile('app.js');
/** /assets/actions.css: the retry dialog, the notes beside it, the change log page. */
export const ACTIONS_CSS = publicFile('actions.css');
/** /assets/controls.css: the controls page's own style. */
export const CONTROLS_CSS = publicFile('controls.css');
/** /assets/controls.js: posts a change with the page's CSRF token, then reloads its section. */
export const CONTROLS_JS = publicFile('controls.js');
/** /assets/learner.js: the learner page's "Move ahead of the queue". */
export const LEARNER_JS = publicFile('learner.js');
