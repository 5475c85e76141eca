// Traces of real transfers: a real worker against the simulator and a real Redis, its spans caught by an
// in-memory exporter. Each attempt is a span with the permit, the HTTP call and the record as children,
// under BullMQ's process span, in the trace of the enqueue; the PATCH carries that trace to the service
// (the simulator keeps each request's traceparent). With tracing off, nothing is sent.
import { afterEach, describe, expect, it } from 'vitest';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-node';
import { trace } from '@opentelemetry/api';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';
import { SPAN_ATTR } from '../../src/core/tracing.ts';

const HTTP_SPAN = 'PATCH /1/learner/{id}/transfer';
const SECRETS = ['sim-acme-1', 'sim-acme-2'];

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

function parentOf(span: ReadableSpan): string | undefined {
  return span.parentSpanContext?.spanId;
}

function childrenOf(spans: readonly ReadableSpan[], parent: ReadableSpan): ReadableSpan[] {
  return spans.filter(
    (s) =>
      parentOf(s) === parent.spanContext().spanId && s.spanContext().traceId === parent.spanContext().traceId,
  );
}

/** traceparent: version-traceid-parentid-flags. */
function parseTraceparent(value: string): { traceId: string; spanId: string } {
  const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/.exec(value);
  expect(m, `traceparent ${value}`).not.toBeNull();
  return { traceId: m?.[1] ?? '', spanId: m?.[2] ?? '' };
}

describe('tracing', () => {
  it('on: an attempt span per transfer with permit, HTTP and record children, its traceparent sent on the PATCH, in the trace of the enqueue', async () => {
    const exporter = new InMemorySpanExporter();
    h = await startHarness({ tag: 'trace-on', traceExporter: exporter });
    const ids = learnersNotIn('acme', 3);
    const { runId } = await h.enqueueIds(ids);
    await h.workUntilIdle();
    const spans = exporter.getFinishedSpans();

    const attempts = spans.filter((s) => s.name === 'transfer.attempt');
    expect(attempts.map((s) => s.attributes[SPAN_ATTR.learnerId]).sort()).toEqual([...ids].sort());
    const patches = h.sim.record.filter((r) => r.method === 'PATCH');
    expect(patches).toHaveLength(ids.length);

    for (const attempt of attempts) {
      const learnerId = attempt.attributes[SPAN_ATTR.learnerId];
      expect(attempt.attributes).toMatchObject({
        [SPAN_ATTR.org]: 'acme',
        [SPAN_ATTR.runId]: runId,
        [SPAN_ATTR.outcome]: 'transferred',
        [SPAN_ATTR.httpStatus]: 200,
        [SPAN_ATTR.attempt]: 1,
      });
      const children = childrenOf(spans, attempt);
      expect(children.map((s) => s.name).sort()).toEqual(
        ['transfer.permit', 'transfer.record', HTTP_SPAN].sort(),
      );
      const http = children.find((s) => s.name === HTTP_SPAN) as ReadableSpan;
      expect(http.attributes).toMatchObject({
        [SPAN_ATTR.httpMethod]: 'PATCH',
        [SPAN_ATTR.httpStatus]: 200,
        [SPAN_ATTR.learnerId]: learnerId,
      });
      expect(children.find((s) => s.name === 'transfer.permit')?.attributes[SPAN_ATTR.admission]).toBe(
        'admitted',
      );
      expect(children.find((s) => s.name === 'transfer.record')?.attributes).toMatchObject({
        [SPAN_ATTR.bucket]: 'transferred',
        [SPAN_ATTR.final]: true,
      });
      // The order of a transfer: the permit ends before the call starts, the record starts after it. (The
      // SDK stamps a start from Date.now(), in whole milliseconds, and an end from the performance clock:
      // MS of slack.)
      const permit = children.find((s) => s.name === 'transfer.permit') as ReadableSpan;
      const record = children.find((s) => s.name === 'transfer.record') as ReadableSpan;
      expect(ns(permit.endTime)).toBeLessThanOrEqual(ns(http.startTime) + MS);
      expect(ns(record.startTime) + MS).toBeGreaterThanOrEqual(ns(http.endTime));

      // The service saw this call's trace: its traceparent names the HTTP span.
      const request = patches.find((r) => r.learnerId === learnerId);
      expect(request?.traceparent, `traceparent of learner ${String(learnerId)}`).toBeDefined();
      const sent = parseTraceparent(request?.traceparent ?? '');
      expect(sent.traceId).toBe(attempt.spanContext().traceId);
      expect(sent.spanId).toBe(http.spanContext().spanId);

      // BullMQ's process span is the attempt's parent, and the enqueue (addBulk) is the root of the trace.
      const process = spans.find((s) => s.spanContext().spanId === parentOf(attempt));
      expect(process?.name).toMatch(/^process /);
      const enqueue = spans.find(
        (s) => s.spanContext().traceId === attempt.spanContext().traceId && parentOf(s) === undefined,
      );
      expect(enqueue?.name).toMatch(/^addBulk /);
    }

    // Ids only: no span name, attribute or event carries a token.
    const text = JSON.stringify(spans.map((s) => [s.name, s.attributes, s.events, s.status]));
    for (const secret of SECRETS) expect(text).not.toContain(secret);
  });

  it('off: no traceparent is sent and the API is back to its no-op tracer', async () => {
    h = await startHarness({ tag: 'trace-off' });
    expect(h.config.tracing).toBeUndefined();
    const ids = learnersNotIn('acme', 2);
    await h.enqueueIds(ids);
    await h.workUntilIdle();
    const patches = h.sim.record.filter((r) => r.method === 'PATCH');
    expect(patches).toHaveLength(ids.length);
    for (const r of patches) expect(r.traceparent).toBeUndefined();
    // No provider registered: a span started now records nothing.
    const span = trace.getTracer('probe').startSpan('probe');
    expect(span.isRecording()).toBe(false);
    span.end();
  });
});

const MS = 1e6;

function ns([s, n]: readonly [number, number]): number {
  return s * 1e9 + n;
}
