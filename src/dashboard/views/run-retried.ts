// The line a run's card carries after a retry re-queued some of its learners: they go back into
// their own run, so the run says it was retried, and the runs list brings it to the top.
import { html, type Html } from '../html.ts';
import type { RunMeta } from '../../outcomes/runs.ts';

/** `2026-11-26 14:02 UTC` from an ISO time. */
function minute(iso: string): string {
  return `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`;
}

export function retriedNote(r: RunMeta): Html | string {
  if (!r.retried) return '';
  const { at, count, by } = r.retried;
  return html`<p class="retried" data-retried="${r.id}">
    retried ${count} at <time datetime="${at}">${minute(at)}</time>${by ? html` by ${by}` : ''} (<a
      href="/changes?action=retry"
      >change log</a
    >)
  </p>`;
}
