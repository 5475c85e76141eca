// Whether an error is Redis refusing a write (out of memory, a read-only replica, unable to persist,
// short of replicas, loading) or a connection lost under a command. Apart from the client and the write
// gate so that both can ask it, and neither has to import the other.

export type RefusalCause = 'OOM' | 'READONLY' | 'MISCONF' | 'NOREPLICAS' | 'LOADING' | 'connection';

// The error code opens Redis's reply ("OOM command not allowed ..."); Redis 6 and older wrap a script's
// refused call as "... @user_script: 1: -OOM command not allowed ...", hence the " -" form.
const REPLY_CODES: readonly (readonly [Exclude<RefusalCause, 'connection'>, RegExp])[] = [
  ['OOM', /(?:^|\s-)OOM command not allowed/],
  ['READONLY', /(?:^|\s-)READONLY\b/],
  ['MISCONF', /(?:^|\s-)MISCONF\b/],
  ['NOREPLICAS', /(?:^|\s-)NOREPLICAS\b/],
  ['LOADING', /(?:^|\s-)LOADING\b/],
];

/** Socket-level codes of a connection lost while a command was on its way. */
const CONNECTION_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'EPIPE',
  'ETIMEDOUT',
  'ENOTCONN',
  'EHOSTUNREACH',
]);
/** ioredis's own texts for a command that a lost connection failed (with maxRetriesPerRequest set). */
const CONNECTION_TEXTS =
  /^(?:Connection is closed\.|Stream isn't writeable|Reached the max retries per request limit|Command timed out|(?:connect|read|write) (?:ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT))/;

/**
 * The cause when `err` says that Redis refused a write (or that the connection was lost under it), else
 * undefined. A MULTI refused as a whole (EXECABORT) is judged by the errors of its commands.
 */
export function isWriteRefusal(err: unknown): { cause: RefusalCause } | undefined {
  if (!err || typeof err !== 'object') return undefined;
  const e = err as { message?: unknown; code?: unknown; previousErrors?: unknown };
  const message = typeof e.message === 'string' ? e.message : '';
  for (const [cause, re] of REPLY_CODES) if (re.test(message)) return { cause };
  if (Array.isArray(e.previousErrors)) {
    for (const inner of e.previousErrors) {
      const found = isWriteRefusal(inner);
      if (found) return found;
    }
  }
  if ((typeof e.code === 'string' && CONNECTION_CODES.has(e.code)) || CONNECTION_TEXTS.test(message)) {
    return { cause: 'connection' };
  }
  return undefined;
}
