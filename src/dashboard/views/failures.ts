// Failures page: filters, a paginated table with checkboxes, and retry one / selected / all
// matching (hidden in read-only mode); /assets/app.js posts the retries and follows them.
import { html, query, type Html } from '../html.ts';
import type { FailurePage } from '../../ops/views/failures.ts';
import type { LearnerOutcome } from '../../outcomes/record.ts';
import { layout, type PageContext } from './layout.ts';
import { confirmationCodes, RETRY_NOTES, retryKind } from '../../ops/actions/retry-risk.ts';

export interface FailuresView {
  page: FailurePage;
  filter: {
    code?: string | undefined;
    org?: string | undefined;
    run?: string | undefined;
    q?: string | undefined;
  };
  codes: readonly string[];
  orgs: readonly string[];
  runs: readonly string[];
  /** codes of the current filter with their counts, for the summary line */
  byCode: Record<string, number>;
}

function select(name: string, label: string, options: readonly string[], current: string | undefined): Html {
  return html`<label
    >${label}
    <select name="${name}">
      <option value="">all</option>
      ${options.map((o) => html`<option value="${o}" ${o === current ? html` selected` : ''}>${o}</option>`)}
    </select></label
  >`;
}

function row(l: LearnerOutcome, readOnly: boolean): Html {
  const key = `${l.org}:${l.learnerId}`;
  return html`<tr data-learner="${key}">
    ${readOnly ? '' : html`<td><input type="checkbox" name="learner" value="${key}" aria-label="select learner ${l.learnerId}" /></td>`}
    <td><a href="/learners/${l.org}/${l.learnerId}">${l.learnerId}</a></td>
    <td>${l.org}</td>
    <td class="state"><span class="code code-${l.state}" data-state>${l.state}</span></td>
    <td data-http>${l.httpStatus ?? ''}</td>
    <td class="message" data-message>${[l.error, l.message].filter(Boolean).join(': ')}</td>
    <td data-attempts="${l.attempts}">${l.attempts}</td>
    <td><time data-time>${l.updatedAt}</time></td>
    ${
      readOnly
        ? ''
        : html`<td>
            <button
              type="button"
              class="retry-one${retryKind(l.state) === 'transient' ? '' : ' retry-confirm'}"
              data-learner="${key}"
              ${retryKind(l.state) === 'transient' ? '' : html` title="${RETRY_NOTES[retryKind(l.state)]}"`}
            >
              retry
            </button>
          </td>`
    }
  </tr>`;
}

/** What a retry does to shown outcomes it cannot help (or held ones): said before any button. */
function permanentNote(byCode: Record<string, number>): Html | string {
  const codes = confirmationCodes(byCode);
  if (codes.length === 0) return '';
  const kinds = [...new Set(codes.map((c) => retryKind(c)))];
  return html`<div class="note" id="permanent-note">
    ${kinds.map(
      (k) =>
        html`<p>
          <b>${codes.filter((c) => retryKind(c) === k).map((c, i) => `${i ? ', ' : ''}${c} ${byCode[c]}`)}</b
          >: ${RETRY_NOTES[k]}. A retry of them asks for an explicit confirmation.
        </p>`,
    )}
  </div>`;
}

export function failuresPage(page: PageContext, v: FailuresView): Html {
  const { total, offset, limit, items } = v.page;
  const f = v.filter;
  const prev = offset > 0 ? Math.max(0, offset - limit) : undefined;
  const next = offset + limit < total ? offset + limit : undefined;
  const link = (o: number) => `/failures${query({ ...f, offset: o, limit })}`;
  const body = html` <h1>Failures</h1>
    <form class="filters" method="get" action="/failures">
      ${select('code', 'code', v.codes, f.code)} ${select('org', 'organization', v.orgs, f.org)}
      ${select('run', 'run', v.runs, f.run)}
      <label
        >learner id <input name="q" inputmode="numeric" pattern="[0-9]*" value="${f.q ?? ''}" size="10"
      /></label>
      <input type="hidden" name="limit" value="${limit}" />
      <button type="submit">filter</button> <a href="/failures">clear</a>
    </form>
    <p id="summary">
      <b id="total">${total}</b> failed learner${total === 1 ? '' : 's'}
      match${total === 1 ? 'es' : ''}${
        Object.keys(v.byCode).length
          ? html` (${Object.entries(v.byCode).map(([c, n], i) => html`${i ? ', ' : ''}<a href="/failures${query({ ...f, code: c, offset: undefined })}">${c} ${n}</a>`)})`
          : ''
      };
      showing ${items.length ? offset + 1 : 0}-${offset + items.length}
    </p>
    ${permanentNote(v.byCode)}
    ${
      page.readOnly
        ? ''
        : html`<div
            class="actions"
            id="retry-actions"
            data-filter="${JSON.stringify({ code: f.code, org: f.org, run: f.run, q: f.q })}"
            data-total="${total}"
          >
            <button type="button" id="retry-selected" disabled>
              retry selected (<span id="selected-count">0</span>)
            </button>
            <button type="button" id="retry-all" ${total === 0 ? html` disabled` : ''}>
              retry all ${total} matching
            </button>
            <span id="retry-result" role="status"></span>
          </div>`
    }
    <div class="table-wrap">
      <table class="failures">
        <thead>
          <tr>
            ${page.readOnly ? '' : html`<th><input type="checkbox" id="select-all" aria-label="select all on this page" /></th>`}
            <th>learner</th>
            <th>org</th>
            <th>outcome</th>
            <th>HTTP</th>
            <th>error message</th>
            <th>attempts</th>
            <th>last time</th>
            ${page.readOnly ? '' : html`<th></th>`}
          </tr>
        </thead>
        <tbody>
          ${
            items.length
              ? items.map((l) => row(l, page.readOnly))
              : html`<tr>
                  <td colspan="9" class="muted">no failure matches</td>
                </tr>`
          }
        </tbody>
      </table>
    </div>
    <nav class="pager">
      ${prev !== undefined ? html`<a href="${link(prev)}" rel="prev">previous</a>` : ''}
      ${next !== undefined ? html`<a href="${link(next)}" rel="next">next</a>` : ''}
    </nav>`;
  return layout(page, 'Failures', body);
}
