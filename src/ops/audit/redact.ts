// The one place that removes personal data (e-mail, name, user id of each revoked authorization) from
// an audit entry, in both stored formats, for every reader and writer that must (docs/personal-data.md).
import { createHash } from 'node:crypto';

/** The personal fields of a revoked authorization. */
export const PERSONAL_FIELDS = ['email', 'name'] as const;
/** What an erasure removes: the personal fields and the user id. */
export const ERASED_FIELDS = ['email', 'name', 'userId'] as const;

/** When and why personal data was removed (stored beside what was removed). */
export interface Removal {
  /** ISO time of the removal. */
  at: string;
  /** Why, in words: "retention 180d", "erasure request". */
  why: string;
}

/** The marker left where personal data was removed. */
export interface RemovalMarker extends Removal {
  fields: string[];
}

/** One person to erase: by e-mail address (any case) or by user id. */
export interface Person {
  email?: string | undefined;
  userId?: number | undefined;
}

/** The field of a stored entry that lists its removals (JSON array of RemovalMarker). */
export const REMOVED_FIELD = 'personalRemoved';

/** What the viewer and a redacted export see in place of a body that could not be parsed. */
export const HIDDEN_BODY = '(hidden: this body could not be parsed and may hold personal data)';

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** A short, stable name for an address that is not the address (for logs and the change log). */
export function addressHash(email: string): string {
  return `sha256:${createHash('sha256').update(email.trim().toLowerCase()).digest('hex').slice(0, 16)}`;
}

/**
 * A revoked authorization without its e-mail address and name (and with `userId`, its user id); with a
 * `removal`, a marker saying when and why. Anything that is not an object, or holds none of them, is
 * returned as it is.
 */
export function redactAuthorization(
  entry: unknown,
  options: { removal?: Removal | undefined; userId?: boolean | undefined } = {},
): unknown {
  if (!isObject(entry)) return entry;
  const fields = options.userId ? ERASED_FIELDS : PERSONAL_FIELDS;
  const present = fields.filter((f) => entry[f] !== undefined);
  if (present.length === 0) return entry;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(entry)) if (!present.includes(k as never)) out[k] = v;
  if (options.removal) out.removed = { fields: present, ...options.removal } satisfies RemovalMarker;
  return out;
}

/** Whether an authorization is this person's. */
export function isPerson(entry: unknown, person: Person): boolean {
  if (!isObject(entry)) return false;
  if (person.userId !== undefined && Number(entry.userId) === person.userId) return true;
  const email = person.email?.trim().toLowerCase();
  return !!email && typeof entry.email === 'string' && entry.email.trim().toLowerCase() === email;
}

/** Whether text that could not be parsed mentions this person (their address, or `"userId": N`). */
export function textMentions(text: string, person: Person): boolean {
  const email = person.email?.trim().toLowerCase();
  if (email && text.toLowerCase().includes(email)) return true;
  if (person.userId === undefined) return false;
  return new RegExp(`"userId"\\s*:\\s*"?${person.userId}(?![0-9])`).test(text);
}

export interface RedactOptions {
  /** Stored removals carry a marker; the viewer's copy needs none. */
  removal?: Removal | undefined;
  /** Only this person's authorizations, user id included (an erasure); none: every one's e-mail and name. */
  person?: Person | undefined;
}

/** A transfer result's `data` without its personal fields, and how many changed. */
export function redactResultData(data: unknown, options: RedactOptions): { data: unknown; changed: number } {
  const auth = isObject(data) ? data.authorizations : undefined;
  const revoked = isObject(auth) ? auth.revoked : undefined;
  if (!isObject(data) || !isObject(auth) || !Array.isArray(revoked)) return { data, changed: 0 };
  let changed = 0;
  const next = revoked.map((a: unknown) => {
    if (options.person && !isPerson(a, options.person)) return a;
    const r = redactAuthorization(a, { removal: options.removal, userId: options.person !== undefined });
    if (r !== a) changed++;
    return r;
  });
  if (changed === 0) return { data, changed };
  return { data: { ...data, authorizations: { ...auth, revoked: next } }, changed };
}

/** A parsed body (`{ data }`) with its data redacted; undefined when the text is not such JSON. */
function redactBodyText(text: string, options: RedactOptions): { text: string; changed: number } | undefined {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!isObject(body)) return undefined;
  const r = redactResultData(body.data, options);
  if (r.changed === 0) return { text, changed: 0 };
  return { text: JSON.stringify({ ...body, data: r.data }), changed: r.changed };
}

/** Whether an unparsable text goes: for an erasure, when it mentions the person; otherwise when not empty. */
const textGoes = (text: string, options: RedactOptions): boolean =>
  text !== '' && (options.person ? textMentions(text, options.person) : true);

/** A parse error's message may quote the body: it goes with it. */
const reasonGoes = (reason: string | undefined, options: RedactOptions): boolean =>
  reason !== undefined && (options.person ? textMentions(reason, options.person) : reason.includes('"'));

const KINDS_WITHOUT_PERSONS: ReadonlySet<string> = new Set(['claim-move', 'possible-repeat', 'record']);

/**
 * A stored audit entry (stream fields, or an archive line's `fields`, or a spool entry's audit) without
 * personal data: the changed fields with a marker (REMOVED_FIELD), or undefined when nothing changed.
 * Counts the authorizations and bodies removed.
 */
export function redactStoredFields(
  fields: Readonly<Record<string, string>>,
  options: RedactOptions & { removal: Removal },
): { fields: Record<string, string>; changed: number } | undefined {
  if (KINDS_WITHOUT_PERSONS.has(fields.kind ?? '')) return undefined;
  const out: Record<string, string> = { ...fields };
  let changed = 0;
  const removed = new Set<string>();
  if (fields.raw !== undefined) {
    const parsed = fields.kind === 'unreadable' ? undefined : redactBodyText(fields.raw, options);
    if (parsed) {
      out.raw = parsed.text;
      changed += parsed.changed;
    } else if (textGoes(fields.raw, options)) {
      out.raw = '';
      changed++;
      removed.add('body');
    }
  } else if (fields.result !== undefined) {
    const r = redactPreviousResult(fields.result, options);
    if (r) {
      out.result = r.text;
      changed += r.changed;
      if (r.body) removed.add('body');
    }
  }
  if (reasonGoes(fields.reason, options) && (removed.has('body') || options.person)) {
    out.reason = '(removed with the body)';
    changed++;
  }
  if (changed === 0) return undefined;
  const fieldsGone = options.person ? [...ERASED_FIELDS] : [...PERSONAL_FIELDS];
  const marker: RemovalMarker = { fields: [...fieldsGone, ...removed], ...options.removal };
  out[REMOVED_FIELD] = JSON.stringify([...parseMarkers(fields[REMOVED_FIELD]), marker]);
  return { fields: out, changed };
}

/** The previous release's `result` field: the parsed data, or `{ unreadable, reason, body }`. */
function redactPreviousResult(
  text: string,
  options: RedactOptions,
): { text: string; changed: number; body: boolean } | undefined {
  let result: unknown;
  try {
    result = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (isObject(result) && 'unreadable' in result) {
    const body = typeof result.body === 'string' ? result.body : '';
    const reason = typeof result.reason === 'string' ? result.reason : undefined;
    const bodyGoes = textGoes(body, options);
    const why = reasonGoes(reason, options) && (bodyGoes || options.person);
    if (!bodyGoes && !why) return undefined;
    const next = { ...result, ...(bodyGoes ? { body: '' } : {}), ...(why ? { reason: '(removed)' } : {}) };
    return { text: JSON.stringify(next), changed: 1, body: bodyGoes };
  }
  const r = redactResultData(result, options);
  return r.changed > 0 ? { text: JSON.stringify(r.data), changed: r.changed, body: false } : undefined;
}

/** The removals an entry lists (none when absent or unreadable). */
export function parseMarkers(value: string | undefined): RemovalMarker[] {
  if (value === undefined) return [];
  try {
    const v = JSON.parse(value) as unknown;
    return Array.isArray(v) ? (v as RemovalMarker[]) : [];
  } catch {
    return [];
  }
}

/**
 * A read audit entry's result and raw body as one who may not see personal data sees them (the viewer,
 * a redacted export): no e-mail address or name, and no body that cannot be parsed.
 */
export function redactForViewer<T extends { result: unknown; raw: string | undefined; kind: string }>(
  entry: T,
): T {
  if (KINDS_WITHOUT_PERSONS.has(entry.kind)) return entry;
  let result = entry.result;
  if (isObject(result) && 'unreadable' in result) {
    const reason =
      typeof result.reason === 'string' && result.reason.includes('"') ? '(hidden)' : result.reason;
    result = { ...result, body: HIDDEN_BODY, reason };
  } else {
    result = redactResultData(result, {}).data;
    // A result of another shape that still names an address is not shown at all.
    if (EMAIL_RE.test(JSON.stringify(result) ?? '')) result = HIDDEN_BODY;
  }
  let raw = entry.raw;
  if (raw !== undefined && raw !== '') {
    raw = redactBodyText(raw, {})?.text ?? HIDDEN_BODY;
    if (EMAIL_RE.test(raw)) raw = HIDDEN_BODY;
  }
  return { ...entry, result, raw };
}

/** Something that looks like an e-mail address. */
const EMAIL_RE = /[^\s"'<>@]+@[^\s"'<>@]+\.[A-Za-z]{2,}/;
