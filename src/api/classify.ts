// Turns an HTTP status + body (or a network error) into a TransferOutcome; pure, so the table
// is tested exhaustively.
import { transferArrayProblem, transferResultSchema } from './schemas.ts';
import type { TransferOutcome } from './outcome.ts';
import type { Scrub } from '../core/log.ts';

const keep: Scrub = (text) => text;

// The spec's 400 for a learner already there. Only that wording: a looser match would turn a
// failure into a silent success.
const ALREADY_RE = /already associated with/i;

/** The one transfer status the spec shows; any other is not a finished transfer. */
const COMPLETED = 'completed';

/**
 * The error body's text fields, each read on its own (a malformed `error` must not lose a valid
 * `message`); strings only, cut to fit a record.
 */
function errorFields(body: unknown, scrub: Scrub = keep): { error?: string; message?: string } {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return {};
  const { error, message } = body as { error?: unknown; message?: unknown };
  return {
    // Scrubbed whole, then cut: a cut first could keep the start of an echoed token.
    ...(typeof error === 'string' ? { error: scrub(error).slice(0, 500) } : {}),
    ...(typeof message === 'string' ? { message: scrub(message).slice(0, 1000) } : {}),
  };
}

/** A value of the service's, quoted for a message and cut short. */
function quoted(value: string): string {
  return `'${value.length > 100 ? `${value.slice(0, 100)}...` : value}'`;
}

export interface ClassifyContext {
  durationMs: number;
  /**
   * The learner the request named: a 200 about another learner is not this learner's transfer.
   */
  learnerId?: number | undefined;
  /** The transferId we recorded for this learner and organization earlier, if any. */
  previousTransferId?: string | undefined;
  retryAfterMs?: number | undefined;
  /** Replaces secrets (the token sent) in the service's text before it is cut. */
  scrub?: Scrub | undefined;
}

/** Classifies a complete response; `body` is the parsed JSON, or `undefined` when not JSON. */
export function classifyResponse(
  status: number,
  body: unknown,
  rawStart: string,
  ctx: ClassifyContext,
): TransferOutcome {
  const { durationMs } = ctx;
  if (status === 200) {
    // Array lengths first, so a hostile body costs a few reads, not one zod issue per element.
    const tooLong = transferArrayProblem(body);
    if (tooLong !== undefined) {
      return {
        code: 'bad-response',
        status,
        durationMs,
        message: `200 with a body the transfer schema does not accept: ${tooLong}`,
        bodyStart: rawStart,
      };
    }
    const parsed = transferResultSchema.safeParse(body);
    if (!parsed.success) {
      return {
        code: 'bad-response',
        status,
        durationMs,
        message: `200 with a body the transfer schema does not accept: ${parsed.error.issues
          .slice(0, 3)
          .map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`)
          .join('; ')}`,
        bodyStart: rawStart,
      };
    }
    const result = parsed.data;
    // Read strictly: a 200 that is not this learner's completed transfer is neither
    // `transferred` nor `already-in-org`; a person looks.
    const mismatches: string[] = [];
    if (ctx.learnerId !== undefined && result.data.learnerId !== ctx.learnerId) {
      mismatches.push(`200 for learner ${result.data.learnerId}, asked for ${ctx.learnerId}`);
    }
    const transferStatus = result.data.transferDetails.status;
    if (transferStatus !== COMPLETED) {
      mismatches.push(`transfer status ${quoted(transferStatus)}, not '${COMPLETED}'`);
    }
    if (mismatches.length > 0) {
      return { code: 'unexpected-result', status: 200, result, message: mismatches.join('; '), durationMs };
    }
    // The spec: a repeated transfer "returns success without creating a duplicate": the
    // transferId we hold, or a message saying so.
    const sameTransfer =
      ctx.previousTransferId !== undefined &&
      result.data.transferDetails.transferId === ctx.previousTransferId;
    if (sameTransfer || (result.message !== undefined && ALREADY_RE.test(result.message))) {
      return { code: 'already-in-org', status: 200, via: 'repeat-success', result, durationMs };
    }
    return { code: 'transferred', status: 200, result, durationMs };
  }
  const fields = errorFields(body, ctx.scrub);
  if (status === 400) {
    const text = `${fields.error ?? ''} ${fields.message ?? ''}`;
    if (ALREADY_RE.test(text)) {
      return { code: 'already-in-org', status: 400, via: 'already-associated', durationMs, ...fields };
    }
    return { code: 'invalid-request', status, durationMs, ...fields };
  }
  if (status === 401) return { code: 'unauthorized', status: 401, durationMs, ...fields };
  if (status === 403) return { code: 'forbidden', status, durationMs, ...fields };
  if (status === 404) return { code: 'not-found', status, durationMs, ...fields };
  if (status === 429) {
    return { code: 'rate-limited', status: 429, durationMs, retryAfterMs: ctx.retryAfterMs, ...fields };
  }
  if (status === 408 || status >= 500) return { code: 'server-error', status, durationMs, ...fields };
  if (status >= 400) return { code: 'invalid-request', status, durationMs, ...fields };
  return {
    code: 'bad-response',
    status,
    durationMs,
    message: `unexpected HTTP status ${status}`,
    bodyStart: rawStart,
  };
}

/** undici / Node error codes that mean the request never reached the server. */
// EHOSTUNREACH / ENETUNREACH are left out: on a reused socket they can follow a write that
// reached the server, and a released permit would let one call too many into the window.
const NOT_SENT = new Set([
  'ECONNREFUSED',
  'UND_ERR_CONNECT_TIMEOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'LT_NOT_SENT',
  // The proxy did not open the tunnel (egress-agent.ts): the request never reached the service.
  'LT_PROXY_TUNNEL',
]);

function errorCodeOf(err: unknown): string {
  let e: unknown = err;
  for (let depth = 0; depth < 4 && e; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && code !== 'UND_ERR' && code.length > 0) return code;
    if ((e as Error).name === 'AbortError' || (e as Error).name === 'TimeoutError') return 'ABORT_ERR';
    e = (e as { cause?: unknown }).cause;
  }
  return 'UNKNOWN';
}

export function classifyNetworkError(
  err: unknown,
  durationMs: number,
  sent: boolean,
  scrub: Scrub = keep,
): TransferOutcome {
  const errorCode = errorCodeOf(err);
  const message = scrub((err as Error)?.message ?? String(err)).slice(0, 500);
  return {
    code: 'network-error',
    errorCode,
    message,
    durationMs,
    maybeDelivered: sent || !NOT_SENT.has(errorCode),
  };
}
