// Whether an error is Redis refusing a write (OOM, READONLY, MISCONF, NOREPLICAS, LOADING) or a
// connection lost under a command; shared by the client and the write gate.

export type RefusalCause = 'OOM' | 'READONLY' | 'MISCONF' | 'NOREPLICAS' | 'LOADING' | 'connection';

// The error code opens Redis's reply; Redis 6 and older wrap a script's refused call ("... -OOM
// ..."), hence the " -" form.
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
/** ioredis's own texts for a command a lost connection failed. */
const CONNECTION_TEXTS =
  /^(?:Connection is closed\.|Stream isn't writeable|Reached the max retries per request limit|Command timed out|(?:connect|read|write) (?:ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT))/;

/**
 * The cause when `err` is Redis refusing a write (or a lost connection), else undefined;
 * EXECABORT is judged by its commands.
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
