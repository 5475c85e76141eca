// The OpenTelemetry SDK, started when tracing is on, and only then loaded: tracing.ts imports this file
// dynamically, so a process with tracing off never loads the SDK, the exporter or bullmq-otel. register()
// makes the provider global with an AsyncLocalStorage context (a span stays the active one across
// awaits) and W3C trace context propagation (the `traceparent` header of the PATCH).
import * as otelApi from '@opentelemetry/api';
import { context, propagation, trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import {
  BatchSpanProcessor,
  ConsoleSpanExporter,
  NodeTracerProvider,
  SimpleSpanProcessor,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-node';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';
import { BullMQOtel } from 'bullmq-otel';
import type { TracingSettings } from './tracing-config.ts';
import { setQueueTelemetry, setTracingApi } from './tracing.ts';

export interface TracingHandle {
  /** Exports what is left and stops tracing: the API is back to its no-op tracer. */
  shutdown(): Promise<void>;
}

function processors(settings: TracingSettings, exporter: SpanExporter | undefined): SpanProcessor[] {
  // A given exporter (a test's in-memory one) gets each span as it ends.
  if (exporter) return [new SimpleSpanProcessor(exporter)];
  return settings.exporters.map((name) =>
    name === 'console'
      ? new SimpleSpanProcessor(new ConsoleSpanExporter())
      : // The exporter reads OTEL_EXPORTER_OTLP_ENDPOINT (and _TRACES_ENDPOINT, _HEADERS, ...) itself.
        new BatchSpanProcessor(new OTLPTraceExporter()),
  );
}

export function startSdk(settings: TracingSettings, exporter?: SpanExporter): TracingHandle {
  const resource = detectResources({ detectors: [envDetector] }).merge(
    resourceFromAttributes({ [ATTR_SERVICE_NAME]: settings.serviceName }),
  );
  const provider = new NodeTracerProvider({ resource, spanProcessors: processors(settings, exporter) });
  provider.register();
  // From now on inSpan makes spans through the API (until now, with no API loaded, it made none).
  setTracingApi(otelApi);
  // BullMQ's own spans (add, process, ...): the enqueue's context travels in the job, so the job's
  // process span, and the transfer attempt under it, are in the enqueue's trace.
  setQueueTelemetry(new BullMQOtel({ tracerName: 'bullmq' }));
  return {
    async shutdown() {
      setQueueTelemetry(undefined);
      await provider.shutdown();
      trace.disable();
      context.disable();
      propagation.disable();
    },
  };
}
