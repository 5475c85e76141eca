// Pieces the pages share: a progress bar, the per-hour chart (inline SVG), the budget table.
import { hourIndex, type HourBucket } from '../../outcomes/hourly.ts';
import type { BudgetView } from '../../limiter/index.ts';
import { html, type Html } from '../html.ts';
import type { RunProgress } from '../../outcomes/run-progress.ts';
import type { Alert } from '../../ops/views/alerts.ts';
import { humanizeMs } from '../../core/duration.ts';
import { num, perWindow } from './units.ts';

function pct(n: number, total: number): string {
  return total > 0 ? ((100 * n) / total).toFixed(2) : '0';
}

/** done / failed / waiting as one bar; an SVG so no inline style is needed. */
export function progressBar(p: RunProgress, id?: string): Html {
  const d = Number(pct(p.done, p.total));
  const f = Number(pct(p.failed, p.total));
  const w = Number(pct(p.waiting, p.total));
  return html`<div class="progress" ${id ? html` data-progress="${id}"` : ''}>
    <svg
      viewBox="0 0 100 6"
      preserveAspectRatio="none"
      role="img"
      aria-label="${p.done} done, ${p.failed} failed, ${p.waiting} waiting${p.cancelled > 0 ? `, ${p.cancelled} cancelled` : ''} of ${p.total}"
    >
      <rect class="bar-bg" x="0" y="0" width="100" height="6" />
      <rect class="bar-done" x="0" y="0" width="${d}" height="6" />
      <rect class="bar-failed" x="${d}" y="0" width="${f}" height="6" />
      <rect class="bar-waiting" x="${d + f}" y="0" width="${w}" height="6" />
    </svg>
    <div class="legend">
      <span class="k-done">done <b data-k="done">${num(p.done)}</b></span>
      <span class="k-failed">failed <b data-k="failed">${num(p.failed)}</b></span>
      <span class="k-waiting">waiting <b data-k="waiting">${num(p.waiting)}</b></span>
      ${
        p.cancelled > 0
          ? html`<span class="k-cancelled">cancelled <b data-k="cancelled">${num(p.cancelled)}</b></span>`
          : ''
      }
      <span>total <b data-k="total">${num(p.total)}</b></span>
    </div>
  </div>`;
}

/**
 * Outcomes per hour over the day ending at `at`: transferred green, the rest grey. Hours come
 * sparse (hourly.ts) and an empty one draws nothing, so a quiet organization's chart is tiny.
 */
export function hourlyChart(hours: readonly HourBucket[], org: string, at: string, span = 24): Html {
  const last = hourIndex(Date.parse(at));
  const series = hours
    .map((h) => {
      const transferred = h.counts.transferred ?? 0;
      const all = Object.values(h.counts).reduce((a, b) => a + b, 0);
      return {
        slot: hourIndex(Date.parse(h.hour)) - (last - span + 1),
        hour: h.hour,
        transferred,
        other: all - transferred,
      };
    })
    .filter((s) => s.slot >= 0 && s.slot < span);
  const max = Math.max(1, ...series.map((s) => s.transferred + s.other));
  const bw = 100 / span;
  const total = series.reduce((a, s) => a + s.transferred, 0);
  return html`<figure class="chart">
    <svg
      viewBox="0 0 100 40"
      preserveAspectRatio="none"
      role="img"
      aria-label="transfers per hour over the last day for ${org}: ${total} transferred"
    >
      ${series.map((s) => {
        const ht = (38 * s.transferred) / max;
        const ho = (38 * s.other) / max;
        const x = (s.slot * bw + 0.1).toFixed(2);
        const w = Math.max(0.2, bw - 0.2).toFixed(2);
        return html`<g
          ><title>${s.hour.slice(11, 16)} UTC: ${s.transferred} transferred, ${s.other} other outcomes</title
          ><rect
            class="bar-other"
            x="${x}"
            y="${(40 - ht - ho).toFixed(2)}"
            width="${w}"
            height="${ho.toFixed(2)}" /><rect
            class="bar-done"
            x="${x}"
            y="${(40 - ht).toFixed(2)}"
            width="${w}"
            height="${ht.toFixed(2)}"
        /></g>`;
      })}
    </svg>
    <figcaption>transfers per hour, last 24 h (${total} transferred; grey: other outcomes)</figcaption>
  </figure>`;
}

/** What a budget row says in its last column: ok, full, paced, blocked. */
function budgetState(s: BudgetView['org']): Html | string {
  if (s.blocked) {
    return html`<span class="${s.blocked.reason === '401' ? 'alert-error' : 'alert-warning'}"
      >${s.blocked.reason === '401' ? 'paused (401)' : `blocked (${s.blocked.reason})`}</span
    >`;
  }
  if (s.remaining === 0) return `full, next in ${humanizeMs(s.nextFreeInMs)}`;
  if (s.pace?.available === 0) {
    const ms = s.pace.nextInMs;
    return `paced, next in ${ms < 1000 ? `${Math.max(1, Math.round(ms))} ms` : humanizeMs(ms)}`;
  }
  return 'ok';
}

/** The organization's and each token's budget per window ("per 4 s"): used, in flight, left. */
export function budgetTable(b: BudgetView): Html {
  const row = (name: Html | string, s: BudgetView['org']) =>
    html`<tr>
      <th scope="row">${name} <span class="muted">${perWindow(s.windowMs)}</span></th>
      <td class="n">${num(s.used)}</td>
      <td class="n">${num(s.inflight)}</td>
      <td class="n" data-left>${num(s.remaining)} <span class="muted">of ${num(s.limit)}</span></td>
      <td>${budgetState(s)}</td>
    </tr>`;
  return html`<div class="table-wrap">
    <table class="budget">
      <thead>
        <tr>
          <th scope="col">budget</th>
          <th scope="col" class="n">used</th>
          <th scope="col" class="n">in flight</th>
          <th scope="col" class="n">left of limit</th>
          <th scope="col">state</th>
        </tr>
      </thead>
      <tbody>
        ${row('organization', b.org)} ${b.tokens.map((t) => row(html`token <code>${t.tokenId}</code>`, t))}
      </tbody>
    </table>
  </div>`;
}

export function alertList(alerts: readonly Alert[]): Html {
  return html`<div id="alerts" role="status">
    ${alerts.map((a) => html`<p class="alert alert-${a.level}">${a.message}</p>`)}
  </div>`;
}

export function counts(c: Record<string, number | undefined>): Html {
  const entries = Object.entries(c).filter(([k, n]) => k !== 'total' && (n ?? 0) > 0);
  if (entries.length === 0) return html`<span class="muted">none yet</span>`;
  return html`<ul class="counts">
    ${entries.map(([k, n]) => html`<li><span class="code code-${k}">${k}</span> ${num(n ?? 0)}</li>`)}
  </ul>`;
}
