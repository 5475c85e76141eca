// Turns an Answer into bytes on the socket (or their absence) and closes the record entry.
// Resets and cut bodies take the raw socket from fastify (reply.hijack): no framework makes them.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FaultKind, RecordResult, RequestRecord } from './types.ts';

export type Answer =
  | {
      kind: 'json';
      status: number;
      body: unknown;
      result?: RecordResult;
      headers?: Record<string, string>;
      effectApplied?: boolean;
      fault?: FaultKind;
    }
  | { kind: 'reset'; result?: RecordResult; effectApplied?: boolean; fault?: FaultKind };

function close(entry: RequestRecord, status: number | 'reset', answer: Answer): void {
  entry.status = status;
  entry.respondedAt = Date.now();
  if (answer.result !== undefined) entry.result = answer.result;
  if (answer.effectApplied) entry.effectApplied = true;
  if (answer.fault !== undefined) entry.fault = answer.fault;
}

/** Destroys the connection with no answer: the client sees a socket error. */
export function resetSocket(request: FastifyRequest, reply: FastifyReply): void {
  reply.hijack();
  request.raw.socket.destroy();
}

/** Sends the head with the full body's length, then half the body, then destroys the socket. */
function sendTruncated(entry: RequestRecord, reply: FastifyReply, status: number, body: unknown): void {
  reply.hijack();
  const full = Buffer.from(JSON.stringify(body));
  const half = full.subarray(0, Math.floor(full.length / 2));
  entry.partialBody = half.toString('utf8');
  const res = reply.raw;
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(full.length),
  });
  res.write(half, () => res.socket?.destroy());
}

export function emit(
  entry: RequestRecord,
  request: FastifyRequest,
  reply: FastifyReply,
  answer: Answer,
): void {
  if (answer.kind === 'reset') {
    close(entry, 'reset', answer);
    resetSocket(request, reply);
    return;
  }
  close(entry, answer.status, answer);
  if (answer.fault === 'truncate') {
    sendTruncated(entry, reply, answer.status, answer.body);
    return;
  }
  void reply
    .code(answer.status)
    .headers(answer.headers ?? {})
    .send(answer.body);
}
