// The Learner API client: one keep-alive undici Pool per base URL, the spec's headers on every request,
// connect/header/body timeouts, and a classified result for every transfer. The token is passed per call
// and is only ever written into the Authorization header: never into an error, a log line or a result.
import { Pool, type Dispatcher } from 'undici';
import { classifyNetworkError, classifyResponse } from './classify.ts';
import type { TransferOutcome } from './outcome.ts';
import { parseRetryAfter } from './retry-after.ts';
import { listPageSchema, type ListPage } from './schemas.ts';

export interface ClientOptions {
  baseUrl: string;
  userAgent: string;
  requestTimeoutMs: number;
  connectTimeoutMs: number;
  /** Sockets kept open to the service (default 64). */
  connections?: number;
}

/** Bodies larger than this are not ours: a transfer result is a few KB. */
const MAX_KEPT_BODY = 64 * 1024;

const MAX_BODY_BYTES = 4 * 1024 * 1024;

export type ListResult =
  | { ok: true; page: ListPage; durationMs: number }
  | { ok: false; outcome: Exclude<TransferOutcome, { code: 'transferred' | 'already-in-org' }> };

export class LearnerApiClient {
  readonly #pool: Pool;
  readonly #basePath: string;
  readonly #options: ClientOptions;

  constructor(options: ClientOptions) {
    this.#options = options;
    const url = new URL(options.baseUrl);
    // A base URL may carry a path (https://host/api); the spec's paths begin with /1/ below it.
    this.#basePath = url.pathname.replace(/\/+$/, '');
    this.#pool = new Pool(url.origin, {
      connections: options.connections ?? 64,
      pipelining: 1,
      keepAliveTimeout: 10_000,
      connect: { timeout: options.connectTimeoutMs },
      headersTimeout: options.requestTimeoutMs,
      bodyTimeout: options.requestTimeoutMs,
    });
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
    onHeaders: () => void,
  ): Promise<{ status: number; headers: Dispatcher.ResponseData['headers']; text: string }> {
    const signal = AbortSignal.timeout(this.#options.requestTimeoutMs);
    const response = await this.#pool.request({
      method,
      path: `${this.#basePath}${path}`,
      headers: this.#headers(token, method === 'PATCH'),
      body: method === 'PATCH' ? '{}' : null,
      signal,
    });
    // The status line arrived: the server has seen the request.
    onHeaders();
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      for await (const chunk of response.body) {
        size += (chunk as Buffer).length;
        if (size > MAX_BODY_BYTES) {
          response.body.destroy();
          throw Object.assign(new Error(`response body over ${MAX_BODY_BYTES} bytes`), {
            code: 'LT_BODY_TOO_LARGE',
          });
        }
        chunks.push(chunk as Buffer);
      }
    } catch (err) {
      // Keep what arrived of a cut body: for a 200 it is all that is left of the transfer's record.
      throw Object.assign(err as Error, {
        ltStatus: response.statusCode,
        ltPartialBody: Buffer.concat(chunks).toString('utf8'),
      });
    }
    return {
      status: response.statusCode,
      headers: response.headers,
      text: Buffer.concat(chunks).toString('utf8'),
    };
  }

  /** PATCH /1/learner/{id}/transfer with body {}. Never throws. */
  async transferLearner(
    learnerId: number,
    token: string,
    options: { previousTransferId?: string | undefined } = {},
  ): Promise<TransferOutcome> {
    const started = performance.now();
    let headersReceived = false;
    try {
      const { status, headers, text } = await this.#send(
        'PATCH',
        `/1/learner/${encodeURIComponent(String(learnerId))}/transfer`,
        token,
        () => {
          headersReceived = true;
        },
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
      });
      // A 200 the schema refuses may still be a transfer that happened: keep its text for the audit.
      if (outcome.code === 'bad-response' && status === 200) outcome.body = text.slice(0, MAX_KEPT_BODY);
      // Every 200 goes to the audit verbatim (unknown fields included): what the service said, not what
      // our schema kept of it.
      if (status === 200) return Object.assign(outcome, { raw: text });
      return outcome;
    } catch (err) {
      const durationMs = performance.now() - started;
      if (headersReceived) {
        // The status line arrived and the body was cut: for a 200 the transfer happened and we lost its
        // record; the retry will resolve to already-in-org.
        const cut = err as Error & { ltStatus?: number; ltPartialBody?: string };
        return {
          code: 'bad-response',
          status: cut.ltStatus ?? 0,
          durationMs,
          message: `response cut while reading the body (${cut.message}): the transfer may have happened`,
          ...(cut.ltStatus === 200 && cut.ltPartialBody !== undefined
            ? { body: cut.ltPartialBody.slice(0, MAX_KEPT_BODY) }
            : {}),
        };
      }
      return classifyNetworkError(err, durationMs, false);
    }
  }

  /** GET /1/learner?page=N. Never throws. */
  async listLearners(page: number, token: string): Promise<ListResult> {
    const started = performance.now();
    try {
      const { status, headers, text } = await this.#send('GET', `/1/learner?page=${page}`, token, () => {});
      const durationMs = performance.now() - started;
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        body = undefined;
      }
      if (status === 200) {
        const parsed = listPageSchema.safeParse(body);
        if (parsed.success) return { ok: true, page: parsed.data, durationMs };
        return {
          ok: false,
          outcome: {
            code: 'bad-response',
            status,
            durationMs,
            message: `page ${page}: body does not match the list schema${
              body === undefined
                ? ' (not JSON)'
                : `: ${parsed.error.issues[0]?.path.join('.')}: ${parsed.error.issues[0]?.message}`
            }`,
            bodyStart: text.slice(0, 200),
          },
        };
      }
      const outcome = classifyResponse(status, body, text.slice(0, 200), {
        durationMs,
        retryAfterMs: parseRetryAfter(headers['retry-after']),
      });
      if (outcome.code === 'transferred' || outcome.code === 'already-in-org') {
        throw new Error('unreachable: a non-200 list answer classified as success');
      }
      return { ok: false, outcome };
    } catch (err) {
      const outcome = classifyNetworkError(err, performance.now() - started, true);
      return {
        ok: false,
        outcome: outcome as Exclude<TransferOutcome, { code: 'transferred' | 'already-in-org' }>,
      };
    }
  }

  async close(): Promise<void> {
    await this.#pool.close();
  }
}
