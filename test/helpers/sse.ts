// Server-sent events of a response body (the dashboard's /api/live), frame by frame as they arrive.

export interface SseFrame {
  /** The frame's text, without the blank line that ends it. */
  raw: string;
  event: string | undefined;
  data: string | undefined;
}

export async function* sseFrames(body: AsyncIterable<unknown>): AsyncGenerator<SseFrame> {
  let buffer = '';
  for await (const chunk of body) {
    buffer += String(chunk);
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const raw = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      yield { raw, event: /^event: (.+)$/m.exec(raw)?.[1], data: /^data: (.+)$/m.exec(raw)?.[1] };
    }
  }
}
