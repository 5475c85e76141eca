// OpenTelemetry's variables that turn tracing on (docs/tracing.md), checked at start like every
// variable; the exporter reads its other OTEL_* itself.
import * as z from 'zod';

export const TRACE_EXPORTERS = ['otlp', 'console', 'none'] as const;
export type TraceExporterName = Exclude<(typeof TRACE_EXPORTERS)[number], 'none'>;

/** Tracing on: which exporters, and the service name the spans carry. */
export interface TracingSettings {
  exporters: readonly TraceExporterName[];
  serviceName: string;
}

export const DEFAULT_SERVICE_NAME = 'learner-transfer';

/** The URL as a message may show it: scheme, host and path, never a user or password. */
function shownUrl(text: string): string {
  try {
    const u = new URL(text);
    return `'${u.protocol}//${u.host}${u.pathname}'`;
  } catch {
    return `'${text.length > 60 ? `${text.slice(0, 57)}...` : text}'`;
  }
}

/** The fields of the environment schema (core/config.ts spreads them in). */
export const tracingEnvFields = {
  OTEL_EXPORTER_OTLP_ENDPOINT: z
    .string()
    .refine((text) => /^https?:\/\/[^/\s]/.test(text.trim()) && URL.canParse(text.trim()), {
      error: (iss) =>
        `OTEL_EXPORTER_OTLP_ENDPOINT: expected the collector's http:// or https:// base URL like http://otel-collector:4318, got ${shownUrl(String(iss.input))}`,
    })
    .optional(),
  OTEL_TRACES_EXPORTER: z
    .string()
    .transform((text, ctx) => {
      const names = text
        .split(',')
        .map((n) => n.trim().toLowerCase())
        .filter((n) => n.length > 0);
      const bad = names.find((n) => !(TRACE_EXPORTERS as readonly string[]).includes(n));
      if (names.length === 0 || bad !== undefined) {
        ctx.addIssue({
          code: 'custom',
          message: `OTEL_TRACES_EXPORTER: expected otlp, console or none (comma-separated), got '${text.slice(0, 60)}'`,
        });
        return z.NEVER;
      }
      return [...new Set(names)] as (typeof TRACE_EXPORTERS)[number][];
    })
    .optional(),
  OTEL_SERVICE_NAME: z
    .string()
    .refine((name) => name.trim().length > 0 && !/[\0\r\n]/.test(name), {
      error: 'OTEL_SERVICE_NAME: expected one line of text, the name the traces are filed under',
    })
    .optional(),
};

/**
 * Tracing on when either variable is set: OTEL_TRACES_EXPORTER names the exporters (`none`:
 * off); the endpoint alone means `otlp`.
 */
export function tracingSettings(e: {
  OTEL_EXPORTER_OTLP_ENDPOINT?: string | undefined;
  OTEL_TRACES_EXPORTER?: readonly (typeof TRACE_EXPORTERS)[number][] | undefined;
  OTEL_SERVICE_NAME?: string | undefined;
}): TracingSettings | undefined {
  const named = e.OTEL_TRACES_EXPORTER;
  if (named === undefined && e.OTEL_EXPORTER_OTLP_ENDPOINT === undefined) return undefined;
  if (named?.includes('none')) return undefined;
  return {
    exporters: (named ?? ['otlp']) as TraceExporterName[],
    serviceName: e.OTEL_SERVICE_NAME?.trim() ?? DEFAULT_SERVICE_NAME,
  };
}
