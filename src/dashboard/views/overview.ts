// Overview page: alerts, then per organization (paused or not, the limits in effect, progress, outcomes,
// budget, chart, ETA), then per run.
import { formatRate } from '../../core/duration.ts';
import { html, query, type Html } from '../html.ts';
import type { OrgOverview, Overview } from '../../ops/overview.ts';
import { layout, type PageContext } from './layout.ts';
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
    </p>`;
}

export function overviewPage(page: PageContext, o: Overview): Html {
  const body = html` <h1>Overview</h1>
    <p class="muted">
      LIMIT_* of this dashboard: ${o.limits.perToken} per token, ${o.limits.perOrg} per organization (the
      workers follow the limits stored in Redis, shown per organization) · updated
      <time id="updated-at">${o.at}</time> <span id="live-state" class="muted">(live)</span>
    </p>
    ${alertList(o.alerts)}
    <h2>Organizations</h2>
    <div class="cards">
      ${o.orgs.map(
        (org) =>
          html`<section class="card" data-org="${org.org}">
            <h3>${org.org}</h3>
            ${policyLines(org)} ${progressBar(org.progress, `org:${org.org}`)}
            <p>${counts(org.learners)}</p>
            <p>
              remaining <b data-remaining="${org.org}">${org.remaining}</b>:
              <span data-eta="${org.org}">${org.eta.text}</span>
            </p>
            <p class="muted">
              jobs: ${org.jobs.waiting} waiting, ${org.jobs.delayed} delayed, ${org.jobs.active} active
            </p>
            ${budgetTable(org.budget)} ${hourlyChart(org.hourly, org.org)}
            <p><a href="/failures${query({ org: org.org })}">failures of ${org.org}</a></p>
          </section>`,
      )}
    </div>
    <h2>Runs</h2>
    ${
      o.runs.length === 0
        ? html`<p class="muted">no run yet</p>`
        : html`<div class="cards">
            ${o.runs.map(
              (r) =>
                html`<section class="card" data-run="${r.id}">
                  <h3><code>${r.id}</code></h3>
                  <p class="muted">${r.kind} · ${r.source} · ${r.createdAt}</p>
                  ${progressBar(r.progress, `run:${r.id}`)}
                  <p>${counts(r.counts)}</p>
                  ${Object.entries(r.byOrg).map(
                    ([org, v]) =>
                      html`<details>
                        <summary>
                          ${org}: ${v.progress.done} done, ${v.progress.failed} failed, ${v.progress.waiting}
                          waiting
                        </summary>
                        ${progressBar(v.progress, `run:${r.id}:${org}`)}${counts(v.counts)}
                      </details>`,
                  )}
                  <p><a href="/failures${query({ run: r.id })}">failures of this run</a></p>
                </section>`,
            )}
          </div>`
    }`;
  return layout(page, 'Overview', body);
}
