// The Learner API client: keep-alive connections (through the egress proxy, if any), the spec's
// headers, timeouts, and a classified result for every call. The token goes only into the
// Authorization header.
import type { Dispatcher } from 'undici';
import { classifyNetworkError, classifyResponse } from './classify.ts';
import { startDeadline, Stalls, type Deadline } from './deadline.ts';
import { createDispatcher, explainProxyRefusal } from './egress-agent.ts';
import { gateCall, sendGate, type SendGate } from './send-gate.ts';
import type { TransferOutcome } from './outcome.ts';
import { parseRetryAfter } from './retry-after.ts';
import { listArrayProblem, listPageSchema, type ListPage } from './schemas.ts';
import { scrubResponseText, secretScrubber, type Scrub } from '../core/log.ts';
import { LearnerTransferError, type ErrorCode } from '../core/errors.ts';
import type { Egress } from '../core/egress.ts';
import { injectTraceContext, inSpan, SPAN_ATTR, SpanKind } from '../core/tracing.ts';

/** The transfer's path as a span names it (no learner id in the name). */
const TRANSFER_TEMPLATE = '/1/learner/{id}/transfer';

export interface ClientOptions {
  baseUrl: string;
  userAgent: string;
  requestTimeoutMs: number;
  connectTimeoutMs: number;
  /** Sockets kept open to the service (default 64). */
  connections?: number;
  /** The proxy and TLS settings (config.egress); none: direct, with the system's CAs. */
  egress?: Egress | undefined;
  /** Called once per stall that calls' timers saw, with its length (deadline.ts). */
  onStall?: (stalledMs: number) => void;
  /** Called once, before this client's first request. */
  onFirstCall?: (() => void) | undefined;
}

/**
 * Body caps per operation, enforced while reading: far above any real result (a few KB) or list
 * page (~40 KB), and bounding the worst JSON.parse. Over its cap a body is `bad-response`.
 */
export const BODY_CAP = { transfer: 256 * 1024, list: 512 * 1024 } as const;

/** The most of a 200's text kept for the audit (the worker's MAX_AUDIT_BODY). */
const MAX_KEPT_BODY = BODY_CAP.transfer;

const TOO_LARGE: ErrorCode = 'LT_BODY_TOO_LARGE';

function capText(bytes: number): string {
  return bytes >= 1024 * 1024 ? `${bytes / (1024 * 1024)} MiB` : `${bytes / 1024} KiB`;
}

/** Tokens shorter than this are not looked for in responses: they look like ordinary text. */
const MIN_SCRUBBED_TOKEN = 8;

function notSent(message: string): LearnerTransferError {
  return new LearnerTransferError('LT_NOT_SENT', `not sent: ${message}`);
}

/** The call's deadline ran out before its request could be written. */
const noConnectionIn = (ms: number): LearnerTransferError =>
  notSent(`no connection was ready within its request timeout (${ms} ms)`);

/**
 * The send gate of one call (send-gate.ts): refuses when the call's deadline gave up, or when
 * it would leave too late for its whole timeout to fit before `hardMs`. Letting it go starts
 * that timeout.
 */
function sendGateOf(deadline: Deadline, ms: number, hardMs: number, sendWithinMs = Infinity): SendGate {
  const start = performance.now();
  const by = start + Math.min(sendWithinMs, hardMs - ms);
  return () => {
    if (deadline.signal.aborted) return noConnectionIn(ms);
    const late = performance.now() - by;
    if (late > 0) {
      return notSent(
        `its first byte would have gone out ${Math.round(late)} ms after its permit's in-flight time allowed ` +
          `(a call leaves only with its whole request timeout of ${ms} ms still ahead of it; this process ` +
          'stalled, or waited that long for a connection)',
      );
    }
    deadline.sent();
    return undefined;
  };
}

/**
 * The request, ended as not sent the moment its deadline runs out unwritten (undici sees an
 * abort only once the request has a connection).
 */
function untilGivenUpUnsent<T>(
  request: Promise<T>,
  signal: AbortSignal,
  written: () => boolean,
  ms: number,
): Promise<T> {
  let onAbort = (): void => {};
  const givenUp = new Promise<never>((_, reject) => {
    onAbort = () => {
      if (!written()) reject(noConnectionIn(ms));
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
  // The request settles later (refused at its connection, or never connected): nobody waits for
  // it.
  request.catch(() => {});
  return Promise.race([request, givenUp]).finally(() => signal.removeEventListener('abort', onAbort));
}

/** Replaces the token a call sent wherever the service's answer echoes it (see log.ts). */
function scrubberFor(token: string): Scrub {
  return token.length >= MIN_SCRUBBED_TOKEN ? secretScrubber([token]) : (text) => text;
}

/** How long a transfer call may take, and may wait before its first byte (the worker's permit). */
export interface TransferCallOptions {
  previousTransferId?: string | undefined;
  /**
   * The call is given up this many ms from now at the latest, however long the process stalls
   * (its permit's in-flight time); written only while its whole timeout still fits before then.
   */
  hardMs?: number | undefined;
  /**
   * The request's first byte must be written within this many ms, or it is not sent
   * (LT_NOT_SENT).
   */
  sendWithinMs?: number | undefined;
}

export type ListResult =
  | { ok: true; page: ListPage; durationMs: number }
  | { ok: false; outcome: Exclude<TransferOutcome, { code: 'transferred' | 'already-in-org' }> };

export class LearnerApiClient {
  readonly #agent: Dispatcher;
  /** The agent, with the last check before a transfer's first byte is written (send-gate.ts). */
  readonly #dispatcher: Dispatcher;
  readonly #base: URL;
  readonly #basePath: string;
  readonly #options: ClientOptions;
  readonly #stalls: Stalls;
  #firstCall: (() => void) | undefined;

  constructor(options: ClientOptions) {
    this.#options = options;
    this.#firstCall = options.onFirstCall;
    this.#stalls = new Stalls(options.onStall);
    const url = new URL(options.baseUrl);
    // A base URL may carry a path (https://host/api); the spec's paths begin with /1/ below it.
    this.#base = url;
    this.#basePath = url.pathname.replace(/\/+$/, '');
    this.#agent = createDispatcher({
      connections: options.connections ?? 64,
      connectTimeoutMs: options.connectTimeoutMs,
      egress: options.egress,
    });
    this.#dispatcher = this.#agent.compose(sendGate);
  }

  #headers(token: string, withBody: boolean): Record<string, string> {
    const headers: Record<string, string> = {
      'user-agent': this.#options.userAgent,
      accept: 'application/json',
      authorization: `Bearer ${token}`,
    };
    if (withBody) headers['content-type'] = 'application/json';
    return headers;
  }

  async #send(
    method: 'GET' | 'PATCH',
    path: string,
    token: string,
    cap: number,
    onHeaders: () => void,
    hardMs: number | undefined,
    sendWithinMs?: number,
  ): Promise<{ status: number; headers: Dispatcher.ResponseData['headers']; text: string }> {
    if (this.#firstCall) {
      const first = this.#firstCall;
      this.#firstCall = undefined;
      first();
    }
    const ms = this.#options.requestTimeoutMs;
    const hard = hardMs ?? 2 * ms;
    const deadline = startDeadline(ms, this.#stalls, hard);
    let written = false;
    const gate = sendGateOf(deadline, ms, hard, sendWithinMs);
    gateCall(deadline.signal, () => {
      const refusal = gate();
      written = refusal === undefined;
      return refusal;
    });
    const headers = this.#headers(token, method === 'PATCH');
    // The transfer carries its trace (W3C traceparent); nothing is added with tracing off.
    if (method === 'PATCH') injectTraceContext(headers);
    try {
      const request = this.#dispatcher.request({
        origin: this.#base.origin,
        method,
        path: `${this.#basePath}${path}`,
        headers,
        body: method === 'PATCH' ? '{}' : null,
        signal: deadline.signal,
      });
      const response = await untilGivenUpUnsent(request, deadline.signal, () => written, ms);
      // The status line arrived: the server has seen the request.
      deadline.progress();
      onHeaders();
      const chunks: Buffer[] = [];
      let size = 0;
      try {
        for await (const chunk of response.body) {
          deadline.progress();
          const buf = chunk as Buffer;
          if (size + buf.length > cap) {
            // Keep exactly the first `cap` bytes, read nothing more.
            chunks.push(buf.subarray(0, cap - size));
            size = cap;
            response.body.destroy();
            throw new LearnerTransferError(
              TOO_LARGE,
              `response body over the ${capText(cap)} cap (${cap} bytes)`,
            );
          }
          size += buf.length;
          chunks.push(buf);
        }
      } catch (err) {
        // Keep what arrived of a cut body: for a 200 it is all that is left of the transfer's
        // record.
        throw Object.assign(err as Error, {
          ltStatus: response.statusCode,
          // Scrubbed of the token we sent before anything cuts or keeps it.
          ltPartialBody: scrubResponseText(Buffer.concat(chunks).toString('utf8'), scrubberFor(token)),
        });
      }
      return {
        status: response.statusCode,
        headers: response.headers,
        // Every text of the service is scrubbed first: no cut below can keep part of the token.
        text: scrubResponseText(Buffer.concat(chunks).toString('utf8'), scrubberFor(token)),
      };
    } catch (err) {
      throw explainProxyRefusal(err, this.#base, this.#options.egress, this.#options.connectTimeoutMs);
    } finally {
      deadline.clear();
    }
  }

  /** PATCH /1/learner/{id}/transfer with body {}, in a client span. Never throws. */
  transferLearner(
    learnerId: number,
    token: string,
    options: TransferCallOptions = {},
  ): Promise<TransferOutcome> {
    return inSpan(
      `PATCH ${TRANSFER_TEMPLATE}`,
      {
        [SPAN_ATTR.httpMethod]: 'PATCH',
        [SPAN_ATTR.urlTemplate]: TRANSFER_TEMPLATE,
        [SPAN_ATTR.serverAddress]: this.#base.hostname,
        [SPAN_ATTR.learnerId]: learnerId,
      },
      async (span) => {
        const outcome = await this.#transferOnce(learnerId, token, options);
        span.setAttribute(SPAN_ATTR.outcome, outcome.code);
        if ('status' in outcome && outcome.status > 0)
          span.setAttribute(SPAN_ATTR.httpStatus, outcome.status);
        if (outcome.code === 'network-error') span.setAttribute('error.type', outcome.errorCode);
        return outcome;
      },
      { kind: SpanKind.CLIENT },
    );
  }

  /** The call itself (transferLearner without its span). */
  async #transferOnce(
    learnerId: number,
    token: string,
    options: TransferCallOptions = {},
  ): Promise<TransferOutcome> {
    const started = performance.now();
    let headersReceived = false;
    try {
      const { status, headers, text } = await this.#send(
        'PATCH',
        `/1/learner/${encodeURIComponent(String(learnerId))}/transfer`,
        token,
        BODY_CAP.transfer,
        () => {
          headersReceived = true;
        },
        options.hardMs,
        options.sendWithinMs,
      );
      let body: unknown;
      try {
        body = text.length > 0 ? JSON.parse(text) : undefined;
      } catch {
        body = undefined;
      }
      const durationMs = performance.now() - started;
      if (status === 200 && body === undefined) {
        return {
          code: 'bad-response',
          status,
          durationMs,
          message: '200 whose body is not JSON: the transfer may have happened',
          bodyStart: text.slice(0, 200),
          body: text.slice(0, MAX_KEPT_BODY),
        };
      }
      const outcome = classifyResponse(status, body, text.slice(0, 200), {
        durationMs,
        learnerId,
        previousTransferId: options.previousTransferId,
        retryAfterMs: parseRetryAfter(headers['retry-after']),
        scrub: scrubberFor(token),
      });
      // A 200 the schema refuses may still be a transfer that happened: keep its text for the audit.
      if (outcome.code === 'bad-response' && status === 200) outcome.body = text.slice(0, MAX_KEPT_BODY);
      // Every 200 goes to the audit verbatim: what the service said, not what our schema kept.
      if (status === 200) return Object.assign(outcome, { raw: text });
      return outcome;
    } catch (err) {
      const durationMs = performance.now() - started;
      if (headersReceived) {
        // The body was cut after the status line: the transfer happened and its record is lost;
        // the retry resolves to already-in-org.
        const cut = err as Error & { ltStatus?: number; ltPartialBody?: string; code?: unknown };
        return {
          code: 'bad-response',
          status: cut.ltStatus ?? 0,
          durationMs,
          message:
            cut.code === TOO_LARGE
              ? `${cut.ltStatus ?? 0} whose body is over the transfer cap of ${capText(BODY_CAP.transfer)}, ` +
                `not parsed: the transfer may have happened; its first ${capText(MAX_KEPT_BODY)} are kept`
              : `response cut while reading the body (${cut.message}): the transfer may have happened`,
          ...(cut.ltStatus === 200 && cut.ltPartialBody !== undefined
            ? { body: cut.ltPartialBody.slice(0, MAX_KEPT_BODY) }
            : {}),
        };
      }
      return classifyNetworkError(err, durationMs, false, scrubberFor(token));
    }
  }

  /** GET /1/learner?page=N. Never throws. */
  async listLearners(page: number, token: string): Promise<ListResult> {
    const started = performance.now();
    try {
      const { status, headers, text } = await this.#send(
        'GET',
        `/1/learner?page=${page}`,
        token,
        BODY_CAP.list,
        () => {},
        undefined,
      );
      const durationMs = performance.now() - started;
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        body = undefined;
      }
      if (status === 200) {
        const bad = (message: string): ListResult => ({
          ok: false,
          outcome: { code: 'bad-response', status, durationMs, message, bodyStart: text.slice(0, 200) },
        });
        // Array length first: a page of a million entries must not become a million zod issues.
        const tooLong = listArrayProblem(body);
        if (tooLong !== undefined)
          return bad(`page ${page}: body does not match the list schema: ${tooLong}`);
        const parsed = listPageSchema.safeParse(body);
        if (parsed.success) return { ok: true, page: parsed.data, durationMs };
        return bad(
          `page ${page}: body does not match the list schema${
            body === undefined
              ? ' (not JSON)'
              : `: ${parsed.error.issues[0]?.path.join('.')}: ${parsed.error.issues[0]?.message}`
          }`,
        );
      }
      const outcome = classifyResponse(status, body, text.slice(0, 200), {
        durationMs,
        retryAfterMs: parseRetryAfter(headers['retry-after']),
        scrub: scrubberFor(token),
      });
      if (outcome.code === 'transferred' || outcome.code === 'already-in-org') {
        throw new LearnerTransferError(
          'LT_INTERNAL',
          'unreachable: a non-200 list answer classified as success',
        );
      }
      return { ok: false, outcome };
    } catch (err) {
      const cut = err as { code?: unknown; ltStatus?: number };
      if (cut.code === TOO_LARGE) {
        return {
          ok: false,
          outcome: {
            code: 'bad-response',
            status: cut.ltStatus ?? 0,
            durationMs: performance.now() - started,
            message: `page ${page}: body over the list cap of ${capText(BODY_CAP.list)}, not parsed`,
          },
        };
      }
      const outcome = classifyNetworkError(err, performance.now() - started, true, scrubberFor(token));
      return {
        ok: false,
        outcome: outcome as Exclude<TransferOutcome, { code: 'transferred' | 'already-in-org' }>,
      };
    }
  }

  async close(): Promise<void> {
    await this.#agent.close();
  }
}
