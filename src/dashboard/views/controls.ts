// Controls page: per organization, whether it is paused (by whom, since when), the limits every worker
// applies (organization, reserve, default per token, each token's own limit, the limits learned from the
// service's 429s and the 429s per token, '-' when none), pause/resume of the organization and
// of each token, a form to set the limits, a reset to LIMIT_*, and the newest entries of its change log.
// Driven by /assets/controls.js (same origin: the page's Content-Security-Policy forbids inline scripts),
// which posts to /api/controls/* with the page's CSRF token and then reloads the organization's section
// from /controls?org=KEY. Read-only dashboards show the state without any control.
import { html, type Html } from '../html.ts';
import { kindWords } from '../../limiter/kinds.ts';
import type { PauseInfo } from '../../limiter/types.ts';
import { seededWords, type LearnedDetail } from '../../ops/views/limits.ts';
import type { ControlsOverview, OrgControls } from '../../ops/views/controls.ts';
import { layout, type PageContext } from './layout.ts';

function pausedCell(p: PauseInfo | null): Html {
  return p
    ? html`<span class="alert-warning" data-paused="true"
        >paused by <span data-paused-by>${p.who}</span> since <time data-paused-at>${p.at}</time>${
          p.reason ? html`: <span data-pause-reason>${p.reason}</span>` : ''
        }</span
      >`
    : html`<span data-paused="false">no</span>`;
}

function pauseButton(o: OrgControls, paused: boolean, tokenId: string | null): Html {
  const label = tokenId === null ? `${paused ? 'Resume' : 'Pause'} ${o.org}` : paused ? 'resume' : 'pause';
  return html`<button
    type="button"
    data-action="${paused ? 'resume' : 'pause'}"
    data-org="${o.org}"
    ${tokenId === null ? '' : html` data-token="${tokenId}"`}
    title="${
      paused
        ? 'Workers go on sending transfers within seconds'
        : 'No worker sends a new transfer from now on; calls in flight finish'
    }"
  >
    ${label}
  </button>`;
}

function stateLine(o: OrgControls, readOnly: boolean): Html {
  return html`<p class="org-state">
    ${
      o.paused
        ? html`<span class="code code-paused" data-org-state>paused</span> by
            <b data-paused-by>${o.paused.who}</b> since <time data-paused-at>${o.paused.at}</time>${
              o.paused.reason ? html` (<span data-pause-reason>${o.paused.reason}</span>)` : ''
            }:
            no new transfer is sent until it is resumed`
        : html`<span class="code code-transferred" data-org-state>running</span>`
    }
    ${readOnly ? '' : pauseButton(o, o.paused !== null, null)}
  </p>`;
}

function learnedText(d: LearnedDetail): string {
  const next = Math.ceil(d.nextProbeInMs / 1000);
  return `learned ${d.max} at ${d.at}; climbs back one step in ${next} s`;
}

function limitsTable(o: OrgControls): Html {
  // Each kind's rows (limiter/kinds.ts), the learned limits after those the limiter grants by.
  const rows = (guardRails: boolean) =>
    kindWords(guardRails).flatMap((w) =>
      (w.controls?.(o) ?? []).map(
        (r) =>
          html`<tr>
            <th>${r.label}</th>
            <td data-limit="${r.attr}">${r.text}</td>
          </tr>`,
      ),
    );
  return html`<table class="limits">
      <tbody>
        ${rows(false)}
        ${
          o.learned && o.learnedDetail
            ? html`<tr>
                <th>learned from the service's 429s</th>
                <td data-limit="learned">
                  ${o.learned} <span class="muted">${learnedText(o.learnedDetail)}</span>
                </td>
              </tr>`
            : ''
        }
        ${rows(true)}
      </tbody>
    </table>
    <p class="muted">
      ${
        o.stored
          ? html`stored in Redis${o.seededFrom ? ` (${seededWords(o.seededFrom)})` : ''}: every worker on
            every host applies these`
          : html`not stored in Redis yet: each process applies its own LIMIT_* until a worker (or a change
            here) stores them`
      }
    </p>
    ${o.differsFromEnvironment.map(
      (d) =>
        html`<p class="alert alert-warning">
          ${d.variable}=${d.env} in this dashboard's environment differs from Redis (${d.stored}): every
          worker follows Redis ("Reset to LIMIT_*" applies this environment's)
        </p>`,
    )}`;
}

function tokensTable(o: OrgControls, readOnly: boolean): Html {
  if (o.tokens.length === 0) return html`<p class="muted">no token</p>`;
  return html`<div class="table-wrap">
    <table class="tokens">
      <thead>
        <tr>
          <th>token</th>
          <th>limit</th>
          <th>learned</th>
          <th>429s</th>
          <th>paused</th>
          ${readOnly ? '' : html`<th></th>`}
        </tr>
      </thead>
      <tbody>
        ${o.tokens.map(
          (t) =>
            html`<tr data-token="${t.tokenId}">
              <td><code>${t.tokenId}</code></td>
              <td data-token-limit>
                ${t.limit} <span class="muted">${t.override ? 'own' : 'default'}</span>
              </td>
              ${
                t.learned && t.learnedDetail
                  ? html`<td data-learned title="${learnedText(t.learnedDetail)}">${t.learned}</td>`
                  : html`<td data-learned>-</td>`
              }
              <td data-rate-limited>${t.rateLimited ?? '-'}</td>
              <td data-token-paused>${pausedCell(t.paused)}</td>
              ${readOnly ? '' : html`<td>${pauseButton(o, t.paused !== null, t.tokenId)}</td>`}
            </tr>`,
        )}
      </tbody>
    </table>
  </div>`;
}

function limitsForm(o: OrgControls): Html {
  const id = (name: string) => `${name}-${o.org}`;
  return html`<form class="filters limits-form" data-org="${o.org}">
    <label for="${id('perOrg')}"
      >per organization
      <input id="${id('perOrg')}" name="perOrg" placeholder="${o.perOrg}" size="10" autocomplete="off"
    /></label>
    <label for="${id('perToken')}"
      >per token
      <input id="${id('perToken')}" name="perToken" placeholder="${o.perToken}" size="10" autocomplete="off"
    /></label>
    <label for="${id('token')}"
      >for
      <select id="${id('token')}" name="token">
        <option value="">every token (the default)</option>
        ${o.tokens.map((t) => html`<option value="${t.tokenId}">token ${t.tokenId} only</option>`)}
      </select></label
    >
    <label for="${id('reserve')}"
      >reserve
      <input
        id="${id('reserve')}"
        name="reserve"
        placeholder="${o.reserveShare ?? String(o.reserve)}"
        size="8"
        autocomplete="off"
    /></label>
    <button type="submit">Set limits</button>
    <button
      type="button"
      data-action="reset"
      data-org="${o.org}"
      title="Back to this dashboard's LIMIT_PER_TOKEN / LIMIT_PER_ORG: no token limits of their own, no reserve"
    >
      Reset to LIMIT_*
    </button>
  </form>`;
}

function changesTable(o: OrgControls): Html {
  if (o.changes.length === 0) return html`<p class="muted" data-no-changes>no change recorded</p>`;
  return html`<div class="table-wrap">
    <table class="changes">
      <thead>
        <tr>
          <th>when</th>
          <th>who</th>
          <th>action</th>
          <th>token</th>
          <th>what</th>
        </tr>
      </thead>
      <tbody>
        ${o.changes.map(
          (c) =>
            html`<tr data-change="${c.id}">
              <td><time>${c.at}</time></td>
              <td>${c.who}</td>
              <td data-change-action>${c.action}</td>
              <td>${c.tokenId ? html`<code>${c.tokenId}</code>` : ''}</td>
              <td class="message">${c.summary}</td>
            </tr>`,
        )}
      </tbody>
    </table>
  </div>`;
}

/** One organization's section (also what the script reloads after a change). */
export function orgSection(o: OrgControls, readOnly: boolean): Html {
  return html`<section class="card controls" data-org="${o.org}" data-paused="${o.paused ? 'true' : 'false'}">
    <h2>${o.org}</h2>
    ${stateLine(o, readOnly)} ${limitsTable(o)}
    <h3>Tokens</h3>
    ${tokensTable(o, readOnly)} ${readOnly ? '' : limitsForm(o)}
    <p role="status" data-result></p>
    <h3>Recent changes</h3>
    ${changesTable(o)}
  </section>`;
}

export function controlsPage(page: PageContext, v: ControlsOverview): Html {
  const body = html`<h1>Controls</h1>
    <p class="muted">
      Pause, resume and change the limits of an organization for every worker on every host: a change applies
      within ${v.applyWithinMs / 1000} s, with no restart, and a pause outlives restarts. Every change is
      logged with who made it (<code>learner-transfer changes</code>). Limits are N/DURATION, like 25/2s or
      1000/1d; a reserve is a number of permits per organization window, or a share like 20%. A learned limit
      is one the service taught with a 429 below our limit: every worker applies it, and it climbs back toward
      the configured limit by itself ("Reset to LIMIT_*" forgets it). '-': none learned, no 429.
    </p>
    ${
      page.readOnly
        ? html`<p class="alert alert-warning">this dashboard runs with --read-only: the controls are off</p>`
        : ''
    }
    <div class="controls-list">${v.orgs.map((o) => orgSection(o, page.readOnly))}</div>
    <link rel="stylesheet" href="/assets/controls.css" />
    ${page.readOnly ? '' : html`<script src="/assets/controls.js" defer></script>`}`;
  return layout(page, 'Controls', body);
}
