// The change log page: who did what and when, newest first, filtered by action, organization and
// author, the filters in the URL.
import { html, query, type Html } from '../html.ts';
import type { ChangeRow } from '../../ops/views/controls.ts';
import { layout, type PageContext } from './layout.ts';

/** The actions offered in the filter (others still show, and can be asked for in the URL). */
export const KNOWN_ACTIONS = [
  'retry',
  'held.release',
  'cancel',
  'pause',
  'resume',
  'limits.',
  'limits.set',
  'limits.reset',
  'priority.urgent',
  'tokens.reload',
] as const;

export interface ChangesView {
  filter: { action?: string | undefined; org?: string | undefined; who?: string | undefined };
  limit: number;
  orgs: readonly string[];
  changes: ChangeRow[];
  /** The id to ask `before` for the next (older) page, when this one is full. */
  older: string | undefined;
}

function option(value: string, label: string, current: string | undefined): Html {
  return html`<option value="${value}" ${value === current ? html` selected` : ''}>${label}</option>`;
}

export function changesPage(page: PageContext, v: ChangesView): Html {
  const f = v.filter;
  const actions: string[] = [...KNOWN_ACTIONS];
  if (f.action && !actions.includes(f.action)) actions.push(f.action);
  const orgs = [...v.orgs];
  if (f.org && !orgs.includes(f.org)) orgs.push(f.org);
  const body = html`<h1>Changes</h1>
    <p class="muted">
      Every operator action, from the CLI and the dashboard, with who made it: newest first. The same log as
      <code>learner-transfer changes</code>.
    </p>
    <form class="filters change-filters" method="get" action="/changes">
      <label
        >action
        <select name="action">
          <option value="">all</option>
          ${actions.map((a) => option(a, a.endsWith('.') ? `${a}*` : a, f.action))}
        </select></label
      >
      <label
        >organization
        <select name="org">
          <option value="">all</option>
          ${orgs.map((o) => option(o, o, f.org))}
        </select></label
      >
      <label
        >who <input name="who" value="${f.who ?? ''}" size="18" placeholder="alice, cli:, 10.0.0.7"
      /></label>
      <button type="submit">filter</button> <a href="/changes">clear</a>
    </form>
    <div class="table-wrap">
      <table class="changes" id="changes">
        <thead>
          <tr>
            <th>time</th>
            <th>who</th>
            <th>action</th>
            <th>org</th>
            <th>token</th>
            <th>what</th>
          </tr>
        </thead>
        <tbody>
          ${
            v.changes.length
              ? v.changes.map(
                  (c) =>
                    html`<tr data-change="${c.id}" data-action="${c.action}">
                      <td><time>${c.at}</time></td>
                      <td data-who>${c.who}</td>
                      <td><code>${c.action}</code></td>
                      <td>${c.org ?? '-'}</td>
                      <td>${c.tokenId ?? '-'}</td>
                      <td class="details">${c.summary}</td>
                    </tr>`,
                )
              : html`<tr>
                  <td colspan="6" class="muted">no change matches</td>
                </tr>`
          }
        </tbody>
      </table>
    </div>
    <nav class="pager">
      ${v.older ? html`<a rel="next" href="/changes${query({ ...f, limit: v.limit, before: v.older })}">older</a>` : ''}
    </nav>`;
  return layout(page, 'Changes', body);
}
