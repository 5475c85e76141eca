// Live updates over server-sent events. One feed per dashboard: while at least one browser listens,
// the overview is collected once per interval and sent to every listener (ten open tabs cost the same
// Redis reads as one); with no listener, nothing runs. A newcomer gets the last snapshot if it is
// younger than the interval, or joins the collection under way: a burst of connections costs one
// collection, not one each. At most `maxClients` streams are open at once (the route answers 503 beyond).
import type { ServerResponse } from 'node:http';
import type { Logger } from '../core/log.ts';

export class LiveFeed<T> {
  readonly #clients = new Set<ServerResponse>();
  readonly #collect: () => Promise<T>;
  readonly #intervalMs: number;
  readonly #logger: Logger;
  readonly maxClients: number;
  #timer: NodeJS.Timeout | undefined;
  #inFlight: Promise<string> | undefined;
  #last: { frame: string; at: number } | undefined;
  #collections = 0;

  constructor(collect: () => Promise<T>, intervalMs: number, logger: Logger, maxClients = Infinity) {
    this.#collect = collect;
    this.#intervalMs = intervalMs;
    this.#logger = logger;
    this.maxClients = maxClients;
  }

  get size(): number {
    return this.#clients.size;
  }

  get full(): boolean {
    return this.#clients.size >= this.maxClients;
  }

  /** How many collections ran (each is one overview's Redis reads). */
  get collections(): number {
    return this.#collections;
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
    // The newcomer should not wait a whole interval for its first snapshot; a fresh one is shared.
    const last = this.#last;
    if (last && Date.now() - last.at < this.#intervalMs) res.write(last.frame);
    else void this.#send(() => [res]);
    this.#timer ??= setInterval(() => void this.#send(() => [...this.#clients]), this.#intervalMs);
  }

  remove(res: ServerResponse): void {
    this.#clients.delete(res);
    if (this.#clients.size === 0 && this.#timer) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }

  /** One collection at a time: a caller while one runs waits for its frame instead of starting another. */
  #frame(): Promise<string> {
    if (!this.#inFlight) {
      const running = this.#collectFrame();
      this.#inFlight = running;
      void running.finally(() => {
        if (this.#inFlight === running) this.#inFlight = undefined;
      });
    }
    return this.#inFlight;
  }

  async #collectFrame(): Promise<string> {
    this.#collections += 1;
    try {
      const frame = `event: overview\ndata: ${JSON.stringify(await this.#collect())}\n\n`;
      this.#last = { frame, at: Date.now() };
      return frame;
    } catch (err) {
      this.#logger.warn({ err: (err as Error).message }, 'live overview failed');
      return `event: problem\ndata: ${JSON.stringify({ message: 'overview unavailable, retrying' })}\n\n`;
    }
  }

  async #send(targets: () => ServerResponse[]): Promise<void> {
    // A tick while the previous collection still runs is skipped (its listeners get that one).
    const frame = await this.#frame();
    for (const res of targets()) if (this.#clients.has(res) && !res.writableEnded) res.write(frame);
  }

  close(): void {
    for (const res of this.#clients) res.end();
    this.#clients.clear();
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
  }
}
