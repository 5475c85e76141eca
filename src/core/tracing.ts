// Spans through @opentelemetry/api only: with tracing off no SDK is loaded and a span costs one
// small object. Callers pass ids, never a secret.
import {
  context,
  propagation,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Span,
} from '@opentelemetry/api';

/** The instrumentation scope of every span of this program. */
export const TRACER_NAME = 'learner-transfer';

/** Attribute names of this program's spans (the HTTP ones are OpenTelemetry's). */
export const SPAN_ATTR = {
  org: 'learner_transfer.org',
  learnerId: 'learner_transfer.learner_id',
  runId: 'learner_transfer.run_id',
  jobId: 'learner_transfer.job_id',
  attempt: 'learner_transfer.attempt',
  tokenId: 'learner_transfer.token_id',
  outcome: 'learner_transfer.outcome',
  bucket: 'learner_transfer.bucket',
  final: 'learner_transfer.final',
  admission: 'learner_transfer.admission',
  wait: 'learner_transfer.wait',
  httpMethod: 'http.request.method',
  httpStatus: 'http.response.status_code',
  urlTemplate: 'url.template',
  serverAddress: 'server.address',
} as const;

/**
 * BullMQ's ways of ending a job that are not failures: a span they end says which, status
 * unset.
 */
const WAITS = new Set(['RateLimitError', 'DelayedError', 'WaitingChildrenError', 'WaitingError']);

export { SpanKind };
export type { Span };

/** BullMQ's telemetry, set by tracing-sdk.ts while tracing is on. */
let bullmqTelemetry: unknown;

/** The `telemetry` option of a BullMQ Queue or Worker: undefined while tracing is off. */
export function queueTelemetry<T>(): T | undefined {
  return bullmqTelemetry as T | undefined;
}

/** Set by tracing-sdk.ts only. */
export function setQueueTelemetry(telemetry: unknown): void {
  bullmqTelemetry = telemetry;
}

/**
 * Runs `fn` in a span active for everything it awaits. A throw ends the span as an error,
 * unless it is one of BullMQ's waits.
 */
export function inSpan<T>(
  name: string,
  attributes: Attributes,
  fn: (span: Span) => Promise<T>,
  options: { kind?: SpanKind; scrub?: (text: string) => string } = {},
): Promise<T> {
  const { kind = SpanKind.INTERNAL, scrub = (text: string) => text } = options;
  return trace
    .getTracer(TRACER_NAME)
    .startActiveSpan(name, { kind, attributes }, async (span): Promise<T> => {
      try {
        return await fn(span);
      } catch (err) {
        const { name = 'Error', message = String(err) } = (err ?? {}) as Partial<Error>;
        if (WAITS.has(name)) span.setAttribute(SPAN_ATTR.wait, name);
        else {
          // Only the name and the scrubbed message: a stack or a cause could carry a secret.
          span.recordException({ name, message: scrub(message) });
          span.setStatus({ code: SpanStatusCode.ERROR, message: scrub(message) });
        }
        throw err;
      } finally {
        span.end();
      }
    });
}

/** Adds the active span's W3C trace context to outgoing request headers. */
export function injectTraceContext(headers: Record<string, string>): void {
  propagation.inject(context.active(), headers);
}
