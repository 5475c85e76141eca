// Overview page: alerts, then the organizations of the view as ranked, filtered cards (state,
// limits, progress, outcomes, budget, chart, ETA), then the runs.
import { retriedNote } from './run-retried.ts';
import { html, query, type Html } from '../html.ts';
import {
  DEFAULT_VIEW,
  RUN_ORGS_SHOWN,
  type OrgOverview,
  type Overview,
  type RunCard,
} from '../../ops/views/overview.ts';
import { SMALL_FLEET, STATE_FILTERS, STATE_LABELS } from '../../ops/views/org-states.ts';
import { viewParams } from '../routes/overview-query.ts';
import { layout, type PageContext } from './layout.ts';
import { kindWords, type CardLine } from '../../limiter/kinds.ts';
import { alertList, budgetTable, counts, hourlyChart, progressBar } from './parts.ts';
import { burnDownFigure } from './burn-down.ts';
import { humanRate, humanRateText, num } from './units.ts';
import { canaryVerdict, DEFAULT_HALT_AT } from '../../ops/actions/canary.ts';

/** A kind's line on the card (limiter/kinds.ts CardLine). */
function cardLine(org: string, l: CardLine): Html {
  const data =
    l.open === undefined
      ? html`data-${l.attr}="${org}"`
      : html`data-${l.attr}="${org}" data-open="${l.open ? 'yes' : 'no'}"`;
  const note = l.note ? html` <span class="muted">(${l.note})</span>` : '';
  const link = l.controls ? html` · <a href="/controls${query({ org })}">controls</a>` : '';
  return html`<p class="${l.warn ? 'alert alert-warning' : 'muted'}" ${data}>${l.text}${note}${link}</p>`;
}

/** The limits every worker applies, as the limiter's peek reports them, in words. */
function limitLines(org: OrgOverview): Html[] {
  const units = { rate: humanRate, num };
  return kindWords().flatMap((w) => {
    const line = w.overview?.(org.budget, units);
    return line ? [cardLine(org.org, line)] : [];
  });
}

/** The card's pauses, limits, pacing and run window. */
function policyLines(org: OrgOverview): Html {
  const b = org.budget;
  const pausedTokens = b.tokens.filter((t) => t.paused);
  const controls = `/controls${query({ org: org.org })}`;
  return html`${
    b.org.paused
      ? html`<p class="alert alert-warning" data-org-paused="${org.org}">
          paused by ${b.org.paused.who} since <time>${b.org.paused.at}</time>${
            b.org.paused.reason ? html`: <span data-pause-reason>${b.org.paused.reason}</span>` : ''
          }:
          no new transfer is sent (<a href="${controls}">resume</a>)
        </p>`
      : ''
  }
  ${pausedTokens.map(
    (t) =>
      html`<p class="alert alert-warning" data-token-paused="${t.tokenId}">
        token <code>${t.tokenId}</code> paused by ${t.paused?.who} since <time>${t.paused?.at}</time>${
          t.paused?.reason ? html`: <span data-pause-reason>${t.paused.reason}</span>` : ''
        }
      </p>`,
  )}
  ${limitLines(org)}
  ${
    org.held
      ? html`<p class="muted" data-held="${org.org}">
          held by the pre-flight check, waiting for a decision:
          ${Object.entries(org.held).map(
            ([cls, n], i) => html`${i > 0 ? ', ' : ''}<span data-held-class="${cls}">${cls} ${num(n)}</span>`,
          )}
          (<a href="/failures${query({ org: org.org, code: 'held' })}">see them</a>)
        </p>`
      : ''
  }`;
}

function orgCard(org: OrgOverview, at: string): Html {
  return html`<section class="card" data-org="${org.org}" data-state="${org.state}">
    <h3>${org.org}</h3>
    <div class="card-grid">
      <div class="card-main">
        ${policyLines(org)} ${progressBar(org.progress, `org:${org.org}`)}
        <p>${counts(org.learners)}</p>
        <p class="finish">
          left <b data-remaining="${org.org}">${num(org.remaining)}</b>:
          <span data-finish="org:${org.org}">${org.burnDown.finishText}</span>
        </p>
        <p class="muted small" data-eta="${org.org}">${org.eta.note ?? ''}</p>
        <p class="muted" data-jobs="${org.org}">
          jobs: ${num(org.jobs.waiting)} waiting, ${num(org.jobs.delayed)} delayed, ${num(org.jobs.active)}
          active
        </p>
        ${budgetTable(org.budget)}
      </div>
      <div class="card-charts">
        ${burnDownFigure(org.burnDown, `organization ${org.org}`, `org:${org.org}`)}
        ${hourlyChart(org.hourly, org.org, at)}
      </div>
    </div>
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
  // By default a fleet bigger than a screen shows its idle organizations as one line.
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
    <div class="cards org-cards" id="org-cards">${o.orgs.map((org) => orgCard(org, o.at))}</div>
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

/** Withdraw a run's uncalled learners (a dry run counts them first); not for viewers. */
function cancelRun(r: RunCard): Html | string {
  if (r.progress.waiting === 0) return '';
  return html`<p>
    <button type="button" class="cancel-run" data-run="${r.id}">withdraw the learners not called yet</button>
    <span role="status" data-cancel-result="${r.id}"></span>
  </p>`;
}

/** A canary run awaiting approval, in words, and for operators the approve button. */
function approveRun(r: RunCard, canAct: boolean): Html | string {
  if (!r.canary || r.progress.approval === 0) return '';
  return html`<p class="canary" data-canary="${r.id}">
    ${canaryVerdict(r.counts, DEFAULT_HALT_AT).text}
    ${
      canAct
        ? html`<button type="button" class="approve-run" data-run="${r.id}">
              approve: release the ${num(r.progress.approval)} learners waiting
            </button>
            <span role="status" data-approve-result="${r.id}"></span>`
        : ''
    }
  </p>`;
}

function runCard(r: RunCard, canAct: boolean): Html {
  const shown = Object.keys(r.byOrg).length;
  return html`<section class="card" data-run="${r.id}">
    <h3><code>${r.id}</code></h3>
    <p class="muted">${r.kind} · ${r.source} · ${r.createdAt}</p>
    ${retriedNote(r)} ${progressBar(r.progress, `run:${r.id}`)} ${approveRun(r, canAct)}
    <p>${counts(r.counts)}</p>
    ${
      r.burnDown
        ? html`<p class="finish">
              left <b>${num(r.burnDown.left)}</b>:
              <span data-finish="run:${r.id}">${r.burnDown.finishText}</span>
            </p>
            ${burnDownFigure(r.burnDown, `run ${r.id}`, `run:${r.id}`)}`
        : html`<p class="muted">no burn-down: the run spans more than ${RUN_ORGS_SHOWN} organizations</p>`
    }
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
    ${canAct ? cancelRun(r) : ''}
  </section>`;
}

export function overviewPage(page: PageContext, o: Overview): Html {
  const body = html` <h1>Overview</h1>
    <p class="muted">
      LIMIT_* of this dashboard: ${humanRateText(o.limits.perToken)} per token,
      ${humanRateText(o.limits.perOrg)} per organization (the workers follow the limits stored in Redis, shown
      per organization) · updated
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
        : html`<div class="cards run-cards">${o.runs.map((r) => runCard(r, !page.readOnly))}</div>`
    }`;
  return layout(page, 'Overview', body);
}
