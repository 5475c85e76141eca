// Overview page: alerts, then the organizations of the view (a summary of the fleet, the filter kept in
// the URL, one page of cards, ranked: alerts, work, failures, idle; the idle ones of a big fleet in one
// line), each with whether it is paused, the limits in effect, progress, outcomes, budget, chart, ETA;
// then per run.
import { retriedNote } from './run-retried.ts';
import { formatRate } from '../../core/duration.ts';
import { html, query, type Html } from '../html.ts';
import { DEFAULT_VIEW, type OrgOverview, type Overview, type RunOverview } from '../../ops/overview.ts';
import { SMALL_FLEET, STATE_FILTERS, STATE_LABELS } from '../../ops/org-states.ts';
import { viewParams } from '../routes/overview-query.ts';
import { layout, type PageContext } from './layout.ts';
import { pacingOf } from '../../ops/limits.ts';
import { alertList, budgetTable, counts, hourlyChart, progressBar } from './parts.ts';

/**
 * Whether the organization (or some of its tokens) is paused, and the limits every worker applies (the
 * policy in Redis, as the limiter's peek reports it), with a link to the controls page.
 */
function policyLines(org: OrgOverview): Html {
  const b = org.budget;
  const perOrg = formatRate({ max: b.org.limit + b.reserve, windowMs: b.org.windowMs });
  const perToken = [...new Set(b.tokens.map((t) => formatRate({ max: t.limit, windowMs: t.windowMs })))];
  const pausedTokens = b.tokens.filter((t) => t.paused);
  const controls = `/controls${query({ org: org.org })}`;
  const tokenPacing = [...new Set(b.tokens.map(pacingOf).filter((x): x is string => x !== null))];
  const paced = [
    ...(pacingOf(b.org) ? [`the organization ${pacingOf(b.org)}`] : []),
    ...tokenPacing.map((x) => `${b.tokens.length === 1 ? 'the token' : 'each token'} ${x}`),
  ];
  return html`${
      b.org.paused
        ? html`<p class="alert alert-warning" data-org-paused="${org.org}">
            paused by ${b.org.paused.who} since <time>${b.org.paused.at}</time>: no new transfer is sent (<a
              href="${controls}"
              >resume</a
            >)
          </p>`
        : ''
    }
    ${pausedTokens.map(
      (t) =>
        html`<p class="alert alert-warning" data-token-paused="${t.tokenId}">
          token <code>${t.tokenId}</code> paused by ${t.paused?.who} since <time>${t.paused?.at}</time>
        </p>`,
    )}
    <p class="muted" data-limits="${org.org}">
      limits${b.policyStored ? '' : ' (LIMIT_*: none stored in Redis yet)'}: ${perOrg} per
      organization${
        b.reserve > 0
          ? ` less a reserve of ${b.reserve} (${formatRate({ max: Math.max(0, b.org.limit), windowMs: b.org.windowMs })} for this tool)`
          : ''
      },
      ${perToken.join(' / ') || '-'} per token · <a href="${controls}">controls</a>
    </p>
    ${paced.length > 0 ? html`<p class="muted" data-pacing="${org.org}">pacing: ${paced.join('; ')}</p>` : ''}
    ${
      org.runWindow
        ? html`<p
            class="${org.runWindow.open ? 'muted' : 'alert alert-warning'}"
            data-run-window="${org.org}"
            data-open="${org.runWindow.open ? 'yes' : 'no'}"
          >
            run window ${org.runWindow.windows}
            (${org.runWindow.tz})${org.runWindow.blackout ? `, blackout ${org.runWindow.blackout}` : ''}:
            ${org.runWindow.open ? org.runWindow.now : `waiting for the run window (${org.runWindow.now})`}
          </p>`
        : ''
    }`;
}

function orgCard(org: OrgOverview, at: string): Html {
  return html`<section class="card" data-org="${org.org}" data-state="${org.state}">
    <h3>${org.org}</h3>
    ${policyLines(org)} ${progressBar(org.progress, `org:${org.org}`)}
    <p>${counts(org.learners)}</p>
    <p>
      remaining <b data-remaining="${org.org}">${org.remaining}</b>:
      <span data-eta="${org.org}">${org.eta.text}</span>
    </p>
    <p class="muted" data-jobs="${org.org}">
      jobs: ${org.jobs.waiting} waiting, ${org.jobs.delayed} delayed, ${org.jobs.active} active
    </p>
    ${budgetTable(org.budget)} ${hourlyChart(org.hourly, org.org, at)}
    <p><a href="/failures${query({ org: org.org })}">failures of ${org.org}</a></p>
  </section>`;
}

/** The filter (org key substring, state), kept in the URL: the form is a GET of this page. */
function filterForm(o: Overview): Html {
  const v = o.view;
  return html`<form class="filters" method="get" action="/">
    <label
      >organization
      <input name="q" value="${v.q}" size="16" pattern="[A-Za-z0-9_-]*" placeholder="part of the key"
    /></label>
    <label
      >state
      <select name="state">
        ${STATE_FILTERS.map(
          (f) =>
            html`<option value="${f}" ${f === v.state ? html` selected` : ''}>
              ${STATE_LABELS[f]}${f === 'attention' || f === 'all' ? '' : ` (${o.summary.byState[f]})`}
            </option>`,
        )}
      </select></label
    >
    ${v.perPage === DEFAULT_VIEW.perPage ? '' : html`<input type="hidden" name="limit" value="${v.perPage}" />`}
    <button type="submit">filter</button> <a href="/">clear</a>
  </form>`;
}

function pager(o: Overview): Html {
  const v = o.view;
  const link = (page: number) => `/${query({ ...viewParams(v), page: page === 1 ? undefined : page })}`;
  return html`<nav class="pager" data-page="${v.page}" data-pages="${v.pages}">
    ${v.page > 1 ? html`<a href="${link(v.page - 1)}" rel="prev">previous</a>` : ''}
    <span>page ${v.page} of ${v.pages}</span>
    ${v.page < v.pages ? html`<a href="${link(v.page + 1)}" rel="next">next</a>` : ''}
  </nav>`;
}

function organizations(o: Overview): Html {
  const v = o.view;
  const first = o.orgs.length ? (v.page - 1) * v.perPage + 1 : 0;
  // The default view leaves idle organizations out of a fleet bigger than a screen: one line says them.
  const idleHidden = v.state === 'attention' && o.summary.byState.idle > 0 && o.summary.total > SMALL_FLEET;
  return html`<p id="fleet-summary">${o.summary.text}</p>
    ${filterForm(o)}
    <p class="muted" id="view-count">
      showing ${first}-${first + o.orgs.length - (o.orgs.length ? 1 : 0)} of ${v.matched}
      organization${v.matched === 1 ? '' : 's'}
      (${STATE_LABELS[v.state]}${v.q ? html`, key containing <code>${v.q}</code>` : ''})
    </p>
    <p id="list-changed" class="alert alert-warning" hidden>
      organizations changed state since this page was made: <a href="${`/${query(viewParams(v))}`}">reload</a>
    </p>
    <div class="cards" id="org-cards">${o.orgs.map((org) => orgCard(org, o.at))}</div>
    ${
      o.orgs.length === 0
        ? html`<p class="muted">no organization matches${idleHidden ? '' : ' this filter'}</p>`
        : ''
    }
    ${
      idleHidden
        ? html`<p class="muted" id="idle-summary">
            ${o.summary.idleText} (<a href="/${query({ state: 'idle', q: v.q || undefined })}">list them</a>)
          </p>`
        : ''
    }
    ${v.pages > 1 ? pager(o) : ''}`;
}

function runCard(r: RunOverview): Html {
  const shown = Object.keys(r.byOrg).length;
  return html`<section class="card" data-run="${r.id}">
    <h3><code>${r.id}</code></h3>
    <p class="muted">${r.kind} · ${r.source} · ${r.createdAt}</p>
    ${retriedNote(r)} ${progressBar(r.progress, `run:${r.id}`)}
    <p>${counts(r.counts)}</p>
    ${Object.entries(r.byOrg).map(
      ([org, v]) =>
        html`<details>
          <summary>
            ${org}: ${v.progress.done} done, ${v.progress.failed} failed, ${v.progress.waiting} waiting
          </summary>
          ${progressBar(v.progress, `run:${r.id}:${org}`)}${counts(v.counts)}
        </details>`,
    )}
    ${
      r.orgCount > shown
        ? html`<p class="muted">
            and ${r.orgCount - shown} more organizations (<a href="/api/runs/${r.id}">all of them</a>)
          </p>`
        : ''
    }
    <p><a href="/failures${query({ run: r.id })}">failures of this run</a></p>
  </section>`;
}

export function overviewPage(page: PageContext, o: Overview): Html {
  const body = html` <h1>Overview</h1>
    <p class="muted">
      LIMIT_* of this dashboard: ${o.limits.perToken} per token, ${o.limits.perOrg} per organization (the
      workers follow the limits stored in Redis, shown per organization) · updated
      <time id="updated-at">${o.at}</time> <span id="live-state" class="muted">(live)</span>
    </p>
    ${alertList(o.alerts)}
    <p class="muted" id="alerts-more" ${o.alertsTotal > o.alerts.length ? '' : html` hidden`}>
      and <span data-alerts-more>${o.alertsTotal - o.alerts.length}</span> more alerts (<a
        href="/${query({ state: 'alert' })}"
        >organizations with alerts</a
      >)
    </p>
    <h2>Organizations</h2>
    ${organizations(o)}
    <h2>Runs</h2>
    ${
      o.runs.length === 0
        ? html`<p class="muted">no run yet</p>`
        : html`<div class="cards">${o.runs.map(runCard)}</div>`
    }`;
  return layout(page, 'Overview', body);
}
