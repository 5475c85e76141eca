// The OpenTelemetry SDK, loaded only when tracing is on (tracing.ts imports it dynamically),
// with an AsyncLocalStorage context and W3C trace context propagation.
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
import { setQueueTelemetry } from './tracing.ts';

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
  // BullMQ's own spans: the enqueue's context travels in the job, so the transfer is in its
  // trace.
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
