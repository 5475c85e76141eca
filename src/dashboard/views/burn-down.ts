// The burn-down chart: learners left over the hours kept, then the projected finish from the ETA
// (dashed), as inline SVG made on the server; pure, every text escaped. The viewBox scales it to
// its box; the text keeps its proportions, so labels stay legible.
import type { BurnDown } from '../../ops/eta/burn-down.ts';
import { html, Html } from '../html.ts';
import { num } from './units.ts';

export const W = 480;
export const H = 190;
/** The plot's box inside the viewBox: room for the y labels at left and two x labels below. */
export const PLOT = { left: 50, right: 468, top: 14, bottom: 150 } as const;

const WEEKDAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** ["Wed 25 Nov", "14:00"]: the axis label of a time, in UTC (the caption says so). */
export function axisDate(ms: number): [string, string] {
  const d = new Date(Math.round(ms / 60_000) * 60_000);
  const hm = `${String(d.getUTCHours()).padStart(2, '0')}:${String(d.getUTCMinutes()).padStart(2, '0')}`;
  return [`${WEEKDAYS[d.getUTCDay()]} ${d.getUTCDate()} ${MONTHS[d.getUTCMonth()]}`, hm];
}

/** A round top for the y axis: 1, 2 or 5 times a power of ten, at least the largest value. */
export function niceMax(n: number): number {
  if (n <= 1) return 1;
  const p = 10 ** Math.floor(Math.log10(n));
  for (const m of [1, 2, 5, 10]) if (m * p >= n) return m * p;
  return 10 * p;
}

const f = (n: number) => n.toFixed(1);

/**
 * The markup without the template's indentation: 50 charts on a page are half as big. Only
 * whitespace goes (every text in it is escaped, so no '<' or '>' of a text looks like a tag's).
 */
function compact(h: Html): Html {
  return new Html(h.value.replace(/>\s+</g, '><').replace(/\s{2,}/g, ' '));
}

function xLabel(x: number, ms: number, anchor: 'start' | 'middle' | 'end', cls = ''): Html {
  const [day, time] = axisDate(ms);
  return html`<text class="bd-x ${cls}" x="${f(x)}" y="${PLOT.bottom + 17}" text-anchor="${anchor}"
    >${day}<tspan x="${f(x)}" dy="15">${time}</tspan></text
  >`;
}

/** The chart of one burn-down; `name` (whose learners) goes into its title, escaped. */
export function burnDownSvg(b: BurnDown, name: string): Html {
  const first = b.points[0]?.[0] ?? b.now;
  const end = Math.max(b.now, b.finishAt ?? b.now);
  const t0 = end - first < 60_000 ? end - 3_600_000 : first;
  const top = niceMax(Math.max(1, ...b.points.map((p) => p[1])));
  const x = (ms: number) => PLOT.left + ((ms - t0) / (end - t0)) * (PLOT.right - PLOT.left);
  const y = (n: number) => PLOT.bottom - (n / top) * (PLOT.bottom - PLOT.top);
  const line = b.points.map(([t, n]) => `${f(x(t))},${f(y(n))}`).join(' ');
  const xNow = x(b.now);
  const finish = b.finishAt !== null && b.left > 0 ? b.finishAt : null;
  const xEnd = finish !== null ? x(finish) : xNow;
  // Labels: the start, the finish (or now) at the right; now between them if there is room.
  const nowLabel = finish !== null && xNow - PLOT.left > 80 && PLOT.right - xNow > 80;
  const history = b.points.length > 1 ? `from ${axisDate(first).join(' ')} UTC to now` : 'now';
  const desc =
    `${num(b.left)} learners left now; ${history}, the line starts at ` +
    `${num(b.points[0]?.[1] ?? b.left)}. ${b.finishText}.`;
  return compact(
    html`<svg
      class="burn-down"
      viewBox="0 0 ${W} ${H}"
      role="img"
      data-left="${b.left}"
      ${finish !== null ? html` data-finish-at="${new Date(finish).toISOString()}"` : ''}
    >
      <title>learners left over time for ${name}</title>
      <desc>${desc}</desc>
      <rect
        class="bd-bg"
        x="${PLOT.left}"
        y="${PLOT.top}"
        width="${PLOT.right - PLOT.left}"
        height="${PLOT.bottom - PLOT.top}"
      />
      ${(top >= 2 ? [0, top / 2, top] : [0, top]).map(
        (v) =>
          html`<line
              class="bd-grid"
              x1="${PLOT.left}"
              x2="${PLOT.right}"
              y1="${f(y(v))}"
              y2="${f(y(v))}"
            /><text class="bd-y" x="${PLOT.left - 6}" y="${f(y(v) + 4)}" text-anchor="end"
              >${num(Math.round(v))}</text
            >`,
      )}
      <polyline class="bd-line" points="${line}" />
      <circle class="bd-now" cx="${f(xNow)}" cy="${f(y(b.left))}" r="3.5">
        <title>now: ${num(b.left)} left</title>
      </circle>
      ${
        finish !== null
          ? html`<line
                class="bd-projection"
                x1="${f(xNow)}"
                y1="${f(y(b.left))}"
                x2="${f(xEnd)}"
                y2="${f(y(0))}"
              /><circle class="bd-finish" cx="${f(xEnd)}" cy="${f(y(0))}" r="4.5"
                ><title>${b.finishText}</title></circle
              >`
          : ''
      }
      ${xLabel(PLOT.left, t0, 'start')} ${nowLabel ? xLabel(xNow, b.now, 'middle', 'bd-x-now') : ''}
      ${xLabel(PLOT.right, end, 'end', finish !== null ? 'bd-x-finish' : '')}
      ${
        b.left === 0 && b.points.every((p) => p[1] === 0)
          ? html`<text
              class="bd-empty"
              x="${(PLOT.left + PLOT.right) / 2}"
              y="${(PLOT.top + PLOT.bottom) / 2}"
              text-anchor="middle"
              >no learner waiting in this span</text
            >`
          : ''
      }
    </svg>`,
  );
}

/** The chart in its figure, with the finish as text under it (updated live). */
export function burnDownFigure(b: BurnDown, name: string, key: string): Html {
  return html`<figure class="burn" data-burn-down="${key}">
    ${burnDownSvg(b, name)}
    <figcaption>
      learners left (UTC; dashed: projected from the
      ETA)${b.partial ? ', hours before this version counted no finishes' : ''}
    </figcaption>
  </figure>`;
}
