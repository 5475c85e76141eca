// The one catalogue of error codes: each code's kind, exit status, HTTP answer where one of
// ours sends it, and one line on what it means; docs/errors.md documents each
// (test/unit/errors.test.ts).

/** Exit statuses of the CLI, documented in the README and in docs/errors.md. */
export const EXIT = {
  ok: 0,
  /** Some learners ended in a failure outcome (not-found, forbidden, retries exhausted...). */
  failures: 1,
  /** An internal error (a bug), or an error not in the catalogue: the same status as failures. */
  internal: 1,
  usage: 2,
  config: 3,
  redis: 4,
  input: 5,
  /** A token was refused (401) or all tokens of an organization are paused. */
  unauthorized: 6,
  /** The Redis ACL user may not run a command, or use a key or channel, that the tool needs. */
  redisPermission: 7,
  /** `work --until-idle`: only learners of a canary run awaiting approval are left. */
  awaitingApproval: 8,
  /** `work --until-idle`: only organizations the error budget halted have work left. */
  halted: 9,
  interrupted: 130,
} as const;

export type ExitStatus = (typeof EXIT)[keyof typeof EXIT];

export type ErrorCode =
  | 'LT_CONFIG_INVALID'
  | 'LT_REDIS_UNREACHABLE'
  /** Redis refused a write a command had to make (OOM, READONLY, MISCONF...). */
  | 'LT_REDIS_WRITE_REFUSED'
  | 'LT_INPUT_INVALID'
  | 'LT_INPUT_UNREADABLE'
  | 'LT_UNKNOWN_ORG'
  | 'LT_NO_TOKEN'
  | 'LT_USAGE'
  /** Two organization keys would name one numeric organization (two daily budgets for one). */
  | 'LT_ORG_ID_TAKEN'
  /** A token is bound to another organization key in Redis (two hourly windows for one token). */
  | 'LT_TOKEN_BOUND'
  /** An output path is a symbolic link or not a regular file: nothing is written through it. */
  | 'LT_OUTPUT_UNSAFE'
  /** The Redis ACL user lacks a command, key or channel rule the tool needs (docs/redis-acl.md). */
  | 'LT_REDIS_PERMISSION'
  /** A Learner API response over its body cap: read no further, recorded as bad-response. */
  | 'LT_BODY_TOO_LARGE'
  /** A call or a wait aborted before it finished (Node's and undici's own code for an abort). */
  | 'ABORT_ERR'
  /**
   * A transfer call given up before its first byte was written: never sent, the permit goes
   * back.
   */
  | 'LT_NOT_SENT'
  /** The egress proxy did not open the tunnel (CONNECT answered non-200, or not in time). */
  | 'LT_PROXY_TUNNEL'
  /** A transfer attempt that BullMQ retries: its message is the job's failedReason. */
  | 'LT_ATTEMPT_FAILED'
  /** Options of the Learner API simulator out of range. */
  | 'LT_SIMULATOR_OPTIONS'
  /** The simulator's answer to a request body that is not JSON. */
  | 'LT_SIMULATOR_BAD_JSON'
  // The dashboard's JSON API answers (docs/dashboard-api.md): the `error` strings are a
  // contract.
  | 'LT_HTTP_BAD_REQUEST'
  | 'LT_HTTP_UNAUTHORIZED'
  | 'LT_HTTP_CSRF'
  | 'LT_HTTP_READ_ONLY'
  | 'LT_HTTP_VIEWER'
  | 'LT_HTTP_CONFIRM_PERMANENT'
  | 'LT_HTTP_FORBIDDEN_HOST'
  | 'LT_HTTP_NOT_FOUND'
  | 'LT_HTTP_NOT_WAITING'
  | 'LT_HTTP_HELD_ELSEWHERE'
  | 'LT_HTTP_IN_FLIGHT'
  | 'LT_HTTP_TOO_MANY_FAILURES'
  | 'LT_HTTP_TOO_MANY_STREAMS'
  | 'LT_HTTP_INTERNAL'
  /** "This cannot happen": a broken invariant, a bug to report. */
  | 'LT_INTERNAL';

export type ErrorKind =
  'usage' | 'config' | 'redis' | 'input' | 'api' | 'abort' | 'transfer' | 'simulator' | 'http' | 'internal';

/** What an HTTP surface of ours answers: the status, and the `error` string of its JSON body. */
export interface HttpAnswer {
  readonly status: number;
  readonly error: string;
}

export interface ErrorInfo {
  readonly kind: ErrorKind;
  /** The exit status of a command this error ends. */
  readonly exit: ExitStatus;
  /** Only for errors an HTTP surface of ours answers with. */
  readonly http?: HttpAnswer;
  /** One line: what happened. docs/errors.md says what to do. */
  readonly description: string;
}

// HTTP answers never end a command: one escaping to the CLI is a bug (EXIT.internal).
const CATALOGUE = {
  LT_CONFIG_INVALID: {
    kind: 'config',
    exit: EXIT.config,
    description:
      'the configuration is invalid: the message names each variable, what it expects and what it got',
  },
  LT_TOKEN_BOUND: {
    kind: 'config',
    exit: EXIT.config,
    description: 'a token of LEARNER_API_TOKENS is bound to another organization key in Redis',
  },
  LT_REDIS_UNREACHABLE: {
    kind: 'redis',
    exit: EXIT.redis,
    description: 'Redis did not answer in time',
  },
  LT_REDIS_WRITE_REFUSED: {
    kind: 'redis',
    exit: EXIT.redis,
    description: 'Redis refused a write the command had to make (out of memory, a read-only replica...)',
  },
  LT_REDIS_PERMISSION: {
    kind: 'redis',
    exit: EXIT.redisPermission,
    description: 'the Redis ACL user may not run a command, or use a key or channel, that the tool needs',
  },
  LT_INPUT_INVALID: {
    kind: 'input',
    exit: EXIT.input,
    description: 'an input holds no valid row, or a value the tool cannot take',
  },
  LT_INPUT_UNREADABLE: {
    kind: 'input',
    exit: EXIT.input,
    description: 'an input file, or the learner list of the service, cannot be read as it must be',
  },
  LT_UNKNOWN_ORG: {
    kind: 'usage',
    exit: EXIT.usage,
    description: 'an organization key that LEARNER_API_TOKENS does not give',
  },
  LT_USAGE: {
    kind: 'usage',
    exit: EXIT.usage,
    description: 'a flag, an argument or a combination of them the command cannot take',
  },
  LT_ORG_ID_TAKEN: {
    kind: 'usage',
    exit: EXIT.usage,
    description: 'a numeric organization id that is already the id of another organization key in Redis',
  },
  LT_OUTPUT_UNSAFE: {
    kind: 'usage',
    exit: EXIT.usage,
    description: 'an output path that is a symbolic link or not a regular file',
  },
  LT_NO_TOKEN: {
    kind: 'api',
    exit: EXIT.unauthorized,
    description:
      'no usable token: the service refused it (401), or every token of the organization is paused',
  },
  LT_BODY_TOO_LARGE: {
    kind: 'api',
    exit: EXIT.input,
    description:
      "a response of the Learner API over the body cap: not read further, recorded as 'bad-response'",
  },
  ABORT_ERR: {
    kind: 'abort',
    exit: EXIT.interrupted,
    description:
      'a call to the Learner API reached its timeout (TimeoutError), or a wait was aborted (AbortError)',
  },
  LT_NOT_SENT: {
    kind: 'transfer',
    exit: EXIT.failures,
    description:
      'a transfer call not sent: its first byte could not be written while its permit still had a whole request timeout of in-flight time left (the process stalled, or no connection was ready in time); the learner waits without using an attempt',
  },
  LT_PROXY_TUNNEL: {
    kind: 'api',
    exit: EXIT.failures,
    description:
      'the egress proxy (HTTPS_PROXY) refused the tunnel to the Learner API, or did not answer in time; nothing reached the service',
  },
  LT_ATTEMPT_FAILED: {
    kind: 'transfer',
    exit: EXIT.failures,
    description: 'a transfer attempt did not finish: BullMQ retries the job with backoff',
  },
  LT_SIMULATOR_OPTIONS: {
    kind: 'simulator',
    exit: EXIT.usage,
    description: 'an option of the Learner API simulator is out of range',
  },
  LT_SIMULATOR_BAD_JSON: {
    kind: 'http',
    exit: EXIT.internal,
    http: { status: 400, error: 'Invalid request' },
    description: "the simulator's answer to a request body that is not JSON",
  },
  LT_HTTP_BAD_REQUEST: {
    kind: 'http',
    exit: EXIT.internal,
    http: { status: 400, error: 'bad-request' },
    description: 'a parameter or a body field of a dashboard request is invalid: the message names it',
  },
  LT_HTTP_UNAUTHORIZED: {
    kind: 'http',
    exit: EXIT.internal,
    http: { status: 401, error: 'unauthorized' },
    description: 'the dashboard needs DASHBOARD_TOKEN (Bearer, or the basic auth password)',
  },
  LT_HTTP_CSRF: {
    kind: 'http',
    exit: EXIT.internal,
    http: { status: 403, error: 'csrf' },
    description: 'a state-changing dashboard request without a valid X-CSRF-Token header',
  },
  LT_HTTP_READ_ONLY: {
    kind: 'http',
    exit: EXIT.internal,
    http: { status: 403, error: 'read-only' },
    description: 'a change asked of a dashboard that runs with --read-only',
  },
  LT_HTTP_VIEWER: {
    kind: 'http',
    exit: EXIT.internal,
    http: { status: 403, error: 'viewer' },
    description: 'a change asked with the viewer token (DASHBOARD_READ_TOKEN): it may look, not act',
  },
  LT_HTTP_CONFIRM_PERMANENT: {
    kind: 'http',
    exit: EXIT.internal,
    http: { status: 400, error: 'confirm-permanent' },
    description:
      'a retry touching learners whose outcome a retry cannot change (not-found, forbidden, ...) or held ones, without "confirmPermanent": true',
  },
  LT_HTTP_FORBIDDEN_HOST: {
    kind: 'http',
    exit: EXIT.internal,
    http: { status: 403, error: 'forbidden-host' },
    description: 'a Host name other than loopback, to a dashboard or /metrics without a token',
  },
  LT_HTTP_NOT_FOUND: {
    kind: 'http',
    exit: EXIT.internal,
    http: { status: 404, error: 'not-found' },
    description: 'no record of the learner or the run the dashboard request names',
  },
  LT_HTTP_NOT_WAITING: {
    kind: 'http',
    exit: EXIT.internal,
    http: { status: 409, error: 'not-waiting' },
    description: 'the learner to move ahead of the queue is not waiting (it finished, or left the queue)',
  },
  LT_HTTP_HELD_ELSEWHERE: {
    kind: 'http',
    exit: EXIT.internal,
    http: { status: 409, error: 'held-elsewhere' },
    description: "the learner to move ahead of the queue is claimed by another organization's work",
  },
  LT_HTTP_IN_FLIGHT: {
    kind: 'http',
    exit: EXIT.internal,
    http: { status: 409, error: 'in-flight' },
    description: 'the learner to move ahead of the queue is being transferred right now',
  },
  LT_HTTP_TOO_MANY_FAILURES: {
    kind: 'http',
    exit: EXIT.internal,
    http: { status: 429, error: 'too-many-failures' },
    description: 'too many failed logins to the dashboard from one address: retry after Retry-After',
  },
  LT_HTTP_TOO_MANY_STREAMS: {
    kind: 'http',
    exit: EXIT.internal,
    http: { status: 503, error: 'too-many-streams' },
    description: 'as many /api/live streams are open as the dashboard serves at once',
  },
  LT_HTTP_INTERNAL: {
    kind: 'http',
    exit: EXIT.internal,
    http: { status: 500, error: 'internal' },
    description: 'a dashboard request failed on the server: the detail is in the dashboard log',
  },
  LT_INTERNAL: {
    kind: 'internal',
    exit: EXIT.internal,
    description: 'something that cannot happen did (a broken invariant): a bug to report, with the message',
  },
} as const satisfies Readonly<Record<ErrorCode, ErrorInfo>>;

/** The catalogue, one entry per code. */
export const ERRORS: Readonly<Record<ErrorCode, ErrorInfo>> = CATALOGUE;

/** The codes an HTTP surface of ours answers with (those with an `http` entry). */
export type HttpErrorCode = {
  [C in ErrorCode]: (typeof CATALOGUE)[C] extends { readonly http: HttpAnswer } ? C : never;
}[ErrorCode];

/** The status and JSON `error` string of an HTTP answer of the catalogue. */
export function httpAnswer(code: HttpErrorCode): HttpAnswer {
  return (CATALOGUE[code] as { readonly http: HttpAnswer }).http;
}
