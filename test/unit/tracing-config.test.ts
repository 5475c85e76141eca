// Tracing's switch: OpenTelemetry's own variables turn it on (docs/tracing.md), a bad value is refused at
// start with the variable named, and off means the SDK is never loaded: only core/tracing-sdk.ts imports
// it, and that file is only ever imported dynamically.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SpanKind as ApiSpanKind, trace } from '@opentelemetry/api';
import { loadConfig } from '../../src/core/config.ts';
import { startTracing } from '../../src/core/tracing-start.ts';
import { inSpan, NOOP_SPAN, queueTelemetry, SpanKind } from '../../src/core/tracing.ts';
import { problemsOf } from '../helpers/config-problems.ts';

const SRC = new URL('../../src/', import.meta.url).pathname;

function listTs(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? listTs(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

describe('tracing configuration', () => {
  it('is off when no OpenTelemetry variable is set, or when the exporter is none', () => {
    expect(loadConfig({}).tracing).toBeUndefined();
    expect(
      loadConfig({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }).tracing,
    ).toBeUndefined();
    expect(loadConfig({ OTEL_SERVICE_NAME: 'alone-is-not-on' }).tracing).toBeUndefined();
  });

  it('is on with the endpoint (otlp) or with the exporters named', () => {
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }).tracing).toEqual({
      exporters: ['otlp'],
      serviceName: 'learner-transfer',
    });
    expect(
      loadConfig({ OTEL_TRACES_EXPORTER: 'OTLP, console,otlp', OTEL_SERVICE_NAME: 'lt-eu' }).tracing,
    ).toEqual({ exporters: ['otlp', 'console'], serviceName: 'lt-eu' });
  });

  it('names the variable and the bad value, never an endpoint password', () => {
    const problems = problemsOf({
      OTEL_TRACES_EXPORTER: 'jaeger',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'grpc://user:s3cret-pass@collector:4317',
    });
    expect(problems).toContain(
      "OTEL_TRACES_EXPORTER: expected otlp, console or none (comma-separated), got 'jaeger'",
    );
    const endpoint = problems.find((p) => p.startsWith('OTEL_EXPORTER_OTLP_ENDPOINT:'));
    expect(endpoint).toMatch(/http:\/\/ or https:\/\/ base URL.*got 'grpc:\/\/collector:4317/);
    expect(problems.join('\n')).not.toContain('s3cret-pass');
  });

  it('off: starting it loads nothing and leaves BullMQ without telemetry', async () => {
    const tracing = await startTracing(undefined);
    expect(tracing.on).toBe(false);
    expect(queueTelemetry()).toBeUndefined();
    expect(trace.getTracer('x').startSpan('x').isRecording()).toBe(false);
    await tracing.stop();
  });

  it("off: a span records nothing, and a throw goes through it; SpanKind is the API's", async () => {
    let seen: unknown;
    const out = await inSpan('x', { a: 1 }, async (span) => {
      seen = span;
      span.setAttribute('b', 2).setAttributes({ c: 3 });
      return 'done';
    });
    expect(out).toBe('done');
    expect(seen).toBe(NOOP_SPAN);
    expect(NOOP_SPAN.isRecording()).toBe(false);
    await expect(
      inSpan('x', {}, async () => {
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect({ ...SpanKind }).toEqual({
      INTERNAL: ApiSpanKind.INTERNAL,
      SERVER: ApiSpanKind.SERVER,
      CLIENT: ApiSpanKind.CLIENT,
      PRODUCER: ApiSpanKind.PRODUCER,
      CONSUMER: ApiSpanKind.CONSUMER,
    });
  });

  it('on: one SDK per process, BullMQ given its telemetry, off again when the last user stops', async () => {
    const settings = { exporters: ['otlp', 'console'] as const, serviceName: 'lt-unit' };
    const first = await startTracing(settings);
    const second = await startTracing(settings);
    expect([first.on, second.on]).toEqual([true, true]);
    expect(queueTelemetry()).toBeDefined();
    // Not ended: nothing is exported (no collector here, nothing printed).
    expect(trace.getTracer('x').startSpan('x').isRecording()).toBe(true);
    await first.stop();
    await first.stop();
    expect(trace.getTracer('x').startSpan('x').isRecording()).toBe(true);
    await second.stop();
    expect(queueTelemetry()).toBeUndefined();
    expect(trace.getTracer('x').startSpan('x').isRecording()).toBe(false);
  });

  it('only core/tracing-sdk.ts imports the SDK, and nothing imports that file but dynamically', () => {
    const sdk = /^import\s+(?!type\b)[^;]*from\s+'(@opentelemetry\/(?!api')[^']+|bullmq-otel)'/m;
    const importers: string[] = [];
    const staticSdkImports: string[] = [];
    for (const file of listTs(SRC)) {
      const text = readFileSync(file, 'utf8');
      const name = relative(SRC, file);
      if (sdk.test(text)) importers.push(name);
      if (/^import[^;]*'[./]*(core\/)?tracing-sdk\.ts'/m.test(text)) staticSdkImports.push(name);
    }
    expect(importers).toEqual(['core/tracing-sdk.ts']);
    // The API too, with tracing off: core/tracing.ts takes it from tracing-sdk.ts (types alone here).
    const api = /^import\s+(?!type\b)[^;]*from\s+'@opentelemetry\/api'/m;
    expect(
      listTs(SRC)
        .filter((f) => api.test(readFileSync(f, 'utf8')))
        .map((f) => relative(SRC, f)),
    ).toEqual(['core/tracing-sdk.ts']);
    expect(staticSdkImports).toEqual([]);
    expect(readFileSync(join(SRC, 'core/tracing-start.ts'), 'utf8')).toContain("import('./tracing-sdk.ts')");
  });
});
