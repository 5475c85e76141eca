// Learner page: where the learner stands, the timeline of its attempts, the audit record of each
// effective transfer (the irreversible part), and for a waiting learner its place in the queue
// and the "Move ahead of the queue" button (driven by /assets/learner.js).
import { RETRY_NOTES, retryKind } from '../../ops/actions/retry-risk.ts';
import { html, type Html } from '../html.ts';
import type { LearnerOutcome } from '../../outcomes/record.ts';
import type { AuditEntry } from '../../outcomes/audit-entry.ts';
import { repeatReason } from '../../outcomes/repeat-causes.ts';
import type { QueuePlace } from '../../queue/priority.ts';
import { layout, type PageContext } from './layout.ts';

/** Where a waiting learner's job stands, in words: "waiting · 3 of 200 in the queue". */
export function describePlace(p: QueuePlace): string {
  switch (p.state) {
    case 'waiting':
      return p.position !== undefined
        ? `waiting · ${p.position} of ${p.waiting ?? '?'} in the queue${p.position === 1 ? ' (next)' : ''}`
        : `waiting · far from the head of ${p.waiting ?? '?'} in the queue`;
    case 'prioritized':
      return 'waiting (behind every job without a priority)';
    case 'delayed':
      return 'waiting out a delay before its next try';
    case 'active':
      return 'being transferred now';
    case 'completed':
    case 'failed':
      return 'finished';
    default:
      return 'no job in the queue';
  }
}

/** The "Move ahead" controls of a waiting learner: its place, and the button unless read-only. */
export interface QueueControls {
  place: QueuePlace;
  /** Show the button (the learner waits and the dashboard is not read-only). */
  canMoveAhead: boolean;
}

function queueBlock(l: LearnerOutcome, q: QueueControls): Html {
  return html`<p>
      queue: <span data-queue data-queue-state="${q.place.state}">${describePlace(q.place)}</span>
    </p>
    ${
      q.canMoveAhead
        ? html`<p>
              <button
                type="button"
                id="move-ahead"
                data-org="${l.org}"
                data-learner-id="${l.learnerId}"
                title="Put this learner ahead of its organization's bulk: the next free worker takes it, within the same budget"
              >
                Move ahead of the queue
              </button>
              <span id="urgent-result" role="status"></span>
            </p>
            <script src="/assets/learner.js" defer></script>`
        : ''
    }`;
}

function items(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

function field(obj: unknown, ...path: string[]): unknown {
  let cur: unknown = obj;
  for (const p of path)
    cur = cur && typeof cur === 'object' ? (cur as Record<string, unknown>)[p] : undefined;
  return cur;
}

function group(g: unknown): Html {
  return html`<li>
    ${String(field(g, 'name') ?? '')} <span class="muted">#${String(field(g, 'id') ?? '')}</span>
  </li>`;
}

/** What stands where personal data was removed (audit/redact.ts) or is hidden from the reader. */
function personalNote(a: unknown): Html | string {
  const removed = field(a, 'removed');
  if (removed) {
    const what = String(field(removed, 'fields') ?? '').replace(/,/g, ', ');
    const why = `${String(field(removed, 'why') ?? '')}, ${String(field(removed, 'at') ?? '')}`;
    return html` <span class="muted" data-removed>(${what} removed: ${why})</span>`;
  }
  if (field(a, 'email') === undefined && field(a, 'name') === undefined)
    return html` <span class="muted" data-personal-hidden
      >(e-mail and name shown to the operator only)</span
    >`;
  return '';
}

function authorization(a: unknown): Html {
  const name = field(a, 'name');
  const email = field(a, 'email');
  const role = field(a, 'role');
  const userId = field(a, 'userId');
  return html`<li>
    user ${userId === undefined ? '(id removed)' : String(userId)} ${name ? String(name) : ''}
    ${email !== undefined ? html`&lt;${String(email)}&gt;` : ''}${role ? html` <span class="muted">(${String(role)})</span>` : ''}${personalNote(a)}
  </li>`;
}

function section(label: string, values: unknown[], each: (v: unknown) => Html): Html {
  return html`<p><b>${label}</b> (${values.length})</p>
    ${
      values.length
        ? html`<ul>
            ${values.map(each)}
          </ul>`
        : ''
    }`;
}

/** One effective transfer: the `data` of its result (src/api/schemas.ts transferResultSchema). */
function auditBlock(a: AuditEntry): Html {
  const r = a.result;
  if (a.kind === 'possible-repeat') {
    return html`<section class="card audit" data-audit="${a.id}">
      <h3>possible repeat</h3>
      <p class="muted">audit entry ${a.id} · run ${a.runId}</p>
      <p class="message">${repeatReason(a.repeatCauses ?? [])}</p>
    </section>`;
  }
  if (a.kind === 'claim-move') {
    return html`<section class="card audit" data-audit="${a.id}">
      <h3>claim moved</h3>
      <p class="muted">audit entry ${a.id} · run ${a.runId}</p>
      <pre>${JSON.stringify(r, null, 2)}</pre>
    </section>`;
  }
  return html`<section class="card audit" data-audit="${a.id}">
    <h3>transfer <code>${a.transferId}</code></h3>
    <p class="muted">
      audit entry ${a.id} · run ${a.runId} · ${String(field(r, 'transferDetails', 'initiatedAt') ?? '')} · new
      owner ${String(field(r, 'newOwner') ?? '')}
    </p>
    ${section('groups removed', items(field(r, 'learnerGroups', 'removed')), group)}
    ${section('groups added', items(field(r, 'learnerGroups', 'added')), group)}
    ${section('authorizations revoked', items(field(r, 'authorizations', 'revoked')), authorization)}
    ${a.kind !== 'transfer' ? html`<p class="message">${a.kind === 'unexpected' ? 'a 200 that was not this learner’s completed transfer' : 'a body that could not be read'}</p>` : ''}
    ${a.possibleRepeat ? html`<p class="message">possible repeat: ${repeatReason(a.repeatCauses ?? [])}</p>` : ''}
    <details>
      <summary>full result${a.raw !== undefined ? ' (as the service sent it)' : ''}</summary>
      <pre>${a.raw ?? JSON.stringify(r, null, 2)}</pre>
    </details>
  </section>`;
}

/** Entries of the record read from the audit archive (and where), and those found nowhere. */
export interface AuditArchiveNotes {
  archived: readonly { id: string; file: string }[];
  missing: readonly string[];
  /** The record's story entry (history, audit ids) was trimmed and is not in the archive. */
  storyArchived?: boolean;
}

/** States a cancel withdraws: not called yet, or held by the pre-flight check. */
const CANCELLABLE: readonly string[] = ['queued', 'retrying', 'held'];

export function learnerPage(
  page: PageContext,
  l: LearnerOutcome,
  audit: readonly AuditEntry[],
  retryable: boolean,
  queue?: QueueControls,
  archive: AuditArchiveNotes = { archived: [], missing: [] },
): Html {
  const archivedIn = new Map(archive.archived.map((a) => [a.id, a.file]));
  const key = `${l.org}:${l.learnerId}`;
  const body = html` <h1>Learner ${l.learnerId} <small class="muted">${l.org}</small></h1>
    <p>
      state
      <span class="code code-${l.state}" data-state>${l.state}</span
      >${l.httpStatus ? html` · HTTP ${l.httpStatus}` : ''} · ${l.attempts}
      attempt${l.attempts === 1 ? '' : 's'} · run
      <a href="/failures?run=${encodeURIComponent(l.runId)}"><code>${l.runId}</code></a>
    </p>
    ${l.message || l.error ? html`<p class="message">${[l.error, l.message].filter(Boolean).join(': ')}</p>` : ''}
    ${l.possibleRepeat ? html`<p class="message" data-possible-repeat>possible repeat: this learner was already in the organization after an attempt whose answer was lost; the authorizations that transfer revoked are not on record</p>` : ''}
    <p class="muted">
      source ${l.source ?? '-'} · enqueued ${l.enqueuedAt} · updated
      ${l.updatedAt}${l.transferId ? html` · transfer <code>${l.transferId}</code>` : ''}${l.tokenId ? html` · token <code>${l.tokenId}</code>` : ''}
    </p>
    ${queue ? queueBlock(l, queue) : ''}
    ${retryable && retryKind(l.state) !== 'transient' ? html`<p class="note" id="permanent-note">${l.state}: ${RETRY_NOTES[retryKind(l.state)]}.</p>` : ''}
    ${!page.readOnly && retryable ? html`<p><button type="button" class="retry-one" data-learner="${key}">retry this learner</button> <span id="retry-result" role="status"></span></p>` : ''}
    ${!page.readOnly && CANCELLABLE.includes(l.state) ? html`<p><button type="button" class="cancel-one" data-learner="${key}">withdraw this learner (cancel)</button> <span id="cancel-result" role="status"></span></p>` : ''}
    <h2>Attempts</h2>
    ${archive.storyArchived ? html`<p class="message" data-story-archived>this learner's attempts and audit ids are archived (trimmed from Redis) and not in the archive this dashboard reads: find them with <code>learner-transfer audit --learner ${l.learnerId} --archive DIR</code></p>` : ''}
    ${
      l.history.length
        ? html`<ol class="timeline">
            ${l.history.map(
              (h) =>
                html`<li>
                  <time>${h.at}</time>
                  <span class="code code-${h.outcome}">${h.outcome}</span
                  >${h.httpStatus ? html` HTTP ${h.httpStatus}` : ''} · ${h.durationMs} ms
                </li>`,
            )}
          </ol>`
        : archive.storyArchived
          ? ''
          : html`<p class="muted">no attempt yet</p>`
    }
    <h2>Audit record</h2>
    ${
      audit.length || archive.missing.length || archive.storyArchived
        ? audit.map(
            (a) =>
              html`${auditBlock(a)}${archivedIn.has(a.id) ? html`<p class="muted" data-archived="${a.id}">audit entry ${a.id} is archived (trimmed from Redis): read from ${archivedIn.get(a.id) ?? ''}</p>` : ''}`,
          )
        : html`<p class="muted">no effective transfer recorded</p>`
    }
    ${archive.missing.map((id) => html`<p class="message" data-archived="${id}">audit entry ${id} is archived (trimmed from Redis) and not in the archive this dashboard reads: find it with <code>learner-transfer audit --learner ${l.learnerId} --archive DIR</code></p>`)}`;
  return layout(page, `Learner ${l.learnerId}`, body);
}
