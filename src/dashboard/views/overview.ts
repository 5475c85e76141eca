// Overview page: alerts, then per organization (progress, outcomes, budget, chart, ETA), then per run.
import { html, query, type Html } from '../html.ts';
import type { Overview } from '../queries/overview.ts';
import { layout, type PageContext } from './layout.ts';
import { alertList, budgetTable, counts, hourlyChart, progressBar } from './parts.ts';

export function overviewPage(page: PageContext, o: Overview): Html {
  const body = html` <h1>Overview</h1>
    <p class="muted">
      limits: ${o.limits.perToken} per token, ${o.limits.perOrg} per organization · updated
      <time id="updated-at">${o.at}</time> <span id="live-state" class="muted">(live)</span>
    </p>
    ${alertList(o.alerts)}
    <h2>Organizations</h2>
    <div class="cards">
      ${o.orgs.map(
        (org) =>
          html`<section class="card" data-org="${org.org}">
            <h3>${org.org}</h3>
            ${progressBar(org.progress, `org:${org.org}`)}
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
