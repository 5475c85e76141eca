// Spans as the hot path sees them, through @opentelemetry/api, loaded only when tracing is on (then
// tracing-sdk.ts hands it over); off, a span is one shared no-op object. Spans carry ids, never a secret.
import type * as OtelApi from '@opentelemetry/api';
import type { Attributes, Span, SpanContext } from '@opentelemetry/api';

/** The API, once tracing-sdk.ts has started the SDK (it stays: after a shutdown its tracer is the no-op one). */
let api: typeof OtelApi | undefined;

/** Set by tracing-sdk.ts only. */
export function setTracingApi(loaded: typeof OtelApi): void {
  api = loaded;
}

/** @opentelemetry/api's SpanKind, by value (test/unit/tracing-config.test.ts holds them equal). */
export const SpanKind = {
  INTERNAL: 0,
  SERVER: 1,
  CLIENT: 2,
  PRODUCER: 3,
  CONSUMER: 4,
} as const satisfies Record<string, OtelApi.SpanKind>;
export type SpanKind = OtelApi.SpanKind;

/** The span context of a span that records nothing (the API's INVALID_SPAN_CONTEXT). */
const INVALID_SPAN_CONTEXT: SpanContext = {
  traceId: '00000000000000000000000000000000',
  spanId: '0000000000000000',
  traceFlags: 0,
};

/** What the API's no-op tracer gives with no span active: a span that records nothing. */
export const NOOP_SPAN: Span = {
  spanContext: () => INVALID_SPAN_CONTEXT,
  setAttribute: () => NOOP_SPAN,
  setAttributes: () => NOOP_SPAN,
  addEvent: () => NOOP_SPAN,
  addLink: () => NOOP_SPAN,
  addLinks: () => NOOP_SPAN,
  setStatus: () => NOOP_SPAN,
  updateName: () => NOOP_SPAN,
  end: () => undefined,
  isRecording: () => false,
  recordException: () => undefined,
};

/** The instrumentation scope of every span of this program. */
export const TRACER_NAME = 'learner-transfer';

/** Attribute names of this program's spans (the HTTP ones are OpenTelemetry's semantic conventions). */
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
 * BullMQ's ways of ending a job that are not failures (wait for budget, come back later): a span they end
 * says which wait it was, and keeps an unset status.
 */
const WAITS = new Set(['RateLimitError', 'DelayedError', 'WaitingChildrenError', 'WaitingError']);

export type { Span };

/** BullMQ's telemetry (bullmq-otel), set by tracing-sdk.ts while tracing is on; undefined when off. */
let bullmqTelemetry: unknown;

/** The `telemetry` option of a BullMQ Queue or Worker: undefined (none at all) while tracing is off. */
export function queueTelemetry<T>(): T | undefined {
  return bullmqTelemetry as T | undefined;
}

/** Set by tracing-sdk.ts only. */
export function setQueueTelemetry(telemetry: unknown): void {
  bullmqTelemetry = telemetry;
}

/**
 * Runs `fn` in a span that is the active one for everything `fn` awaits (its child spans, the traceparent
 * of its HTTP calls). A throw ends the span as an error, unless it is one of BullMQ's waits.
 */
export function inSpan<T>(
  name: string,
  attributes: Attributes,
  fn: (span: Span) => Promise<T>,
  options: { kind?: SpanKind; scrub?: (text: string) => string } = {},
): Promise<T> {
  // Tracing off: no span to keep, nothing to end; what fn throws goes through as it would.
  if (!api) return (async () => fn(NOOP_SPAN))();
  const { trace, SpanStatusCode } = api;
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
          // Only the name and the scrubbed message: a stack or a cause could carry what a log would not.
          span.recordException({ name, message: scrub(message) });
          span.setStatus({ code: SpanStatusCode.ERROR, message: scrub(message) });
        }
        throw err;
      } finally {
        span.end();
      }
    });
}

/** Adds W3C trace context (`traceparent`, `tracestate`) of the active span to outgoing request headers. */
export function injectTraceContext(headers: Record<string, string>): void {
  // Tracing off: no propagator, nothing to add (as the API's no-op propagator adds nothing).
  api?.propagation.inject(api.context.active(), headers);
}
