// Live updates over server-sent events. One feed per dashboard: while at least one browser listens,
// the overview is collected once per interval and sent to every listener (ten open tabs cost the same
// Redis reads as one); with no listener, nothing runs.
import type { ServerResponse } from 'node:http';
import type { Logger } from '../log.ts';

export class LiveFeed<T> {
  readonly #clients = new Set<ServerResponse>();
  readonly #collect: () => Promise<T>;
  readonly #intervalMs: number;
  readonly #logger: Logger;
  #timer: NodeJS.Timeout | undefined;
  #busy = false;

  constructor(collect: () => Promise<T>, intervalMs: number, logger: Logger) {
    this.#collect = collect;
    this.#intervalMs = intervalMs;
    this.#logger = logger;
  }

  get size(): number {
    return this.#clients.size;
  }

  add(res: ServerResponse): void {
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
      'x-content-type-options': 'nosniff',
    });
    res.write(`retry: ${Math.max(1000, this.#intervalMs)}\n\n`);
    this.#clients.add(res);
    res.on('close', () => this.remove(res));
    // The newcomer should not wait a whole interval for its first snapshot.
    void this.#tick([res]);
    this.#timer ??= setInterval(() => void this.#tick([...this.#clients]), this.#intervalMs);
  }

  remove(res: ServerResponse): void {
    this.#clients.delete(res);
    if (this.#clients.size === 0 && this.#timer) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }

  async #tick(targets: ServerResponse[]): Promise<void> {
    if (this.#busy && targets.length > 1) return;
    this.#busy = true;
    let frame: string;
    try {
      frame = `event: overview\ndata: ${JSON.stringify(await this.#collect())}\n\n`;
    } catch (err) {
      this.#logger.warn({ err: (err as Error).message }, 'live overview failed');
      frame = `event: problem\ndata: ${JSON.stringify({ message: 'overview unavailable, retrying' })}\n\n`;
    } finally {
      this.#busy = false;
    }
    for (const res of targets) if (this.#clients.has(res) && !res.writableEnded) res.write(frame);
  }

  close(): void {
    for (const res of this.#clients) res.end();
    this.#clients.clear();
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
  }
}
