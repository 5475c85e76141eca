// The request record: one small entry per request, in arrival order, filled in as it goes
// (counted, answered). Tests assert on it, so it is never trimmed.
import type { IncomingMessage } from 'node:http';
import type { RequestRecord } from './types.ts';

export class RequestLog {
  readonly entries: RequestRecord[] = [];
  private readonly byRequest = new WeakMap<IncomingMessage, RequestRecord>();

  /** Opens the entry of a request on arrival. Its status stays 0 until it is answered or reset. */
  begin(raw: IncomingMessage): RequestRecord {
    const url = raw.url ?? '/';
    const q = url.indexOf('?');
    const entry: RequestRecord = {
      seq: this.entries.length + 1,
      method: raw.method ?? 'GET',
      path: q < 0 ? url : url.slice(0, q),
      org: null,
      tokenLabel: null,
      receivedAt: Date.now(),
      status: 0,
      effectApplied: false,
    };
    // The caller's W3C trace context, when it sent one (tests of tracing match it to their spans).
    const traceparent = raw.headers.traceparent;
    if (typeof traceparent === 'string') entry.traceparent = traceparent;
    this.entries.push(entry);
    this.byRequest.set(raw, entry);
    return entry;
  }

  /** The entry of a request (opened by the onRequest hook; opened here if a hook was bypassed). */
  of(raw: IncomingMessage): RequestRecord {
    return this.byRequest.get(raw) ?? this.begin(raw);
  }
}
