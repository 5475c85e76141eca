// Live updates over server-sent events: one feed per dashboard collects the views its listeners
// watch once per interval, shared by every listener (docs/security.md, "Load limits"); with no
// listener, nothing runs. A listener's first frame is whole (a reconnected one's page may hold
// anything older), later ones carry only what changed.
import type { ServerResponse } from 'node:http';
import type { Logger } from '../core/log.ts';

export interface LiveCollector<P extends object> {
  /** One collection for these views (each listener's view key): the payload of each. */
  collect(views: readonly string[]): Promise<ReadonlyMap<string, P>>;
  /** What a newcomer is sent: the payload whole. */
  full(payload: P): unknown;
  /** What a listener that holds `previous` is sent for `next`: what changed. */
  diff(previous: P, next: P): unknown;
}

interface Listener<P extends object> {
  view: string;
  /** The payload whose frame it was sent last (the base of its next diff). */
  last: P | undefined;
}

export class LiveFeed<P extends object> {
  readonly #clients = new Map<ServerResponse, Listener<P>>();
  readonly #collector: LiveCollector<P>;
  readonly #intervalMs: number;
  readonly #logger: Logger;
  readonly maxClients: number;
  #timer: NodeJS.Timeout | undefined;
  #inFlight: { views: ReadonlySet<string>; result: Promise<ReadonlyMap<string, P> | undefined> } | undefined;
  readonly #latest = new Map<string, { payload: P; at: number }>();
  /** The whole frame of a payload, built once however many listeners (re)connect to it. */
  readonly #fullFrames = new WeakMap<P, string>();
  #collections = 0;

  constructor(collector: LiveCollector<P>, intervalMs: number, logger: Logger, maxClients = Infinity) {
    this.#collector = collector;
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

  /** How many collections ran (each is one read of the views listened to). */
  get collections(): number {
    return this.#collections;
  }

  /** `view`: the key of the view the listener watches (listeners of one key share its payloads). */
  add(res: ServerResponse, view: string): void {
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
      'x-content-type-options': 'nosniff',
    });
    res.write(`retry: ${Math.max(1000, this.#intervalMs)}\n\n`);
    const listener: Listener<P> = { view, last: undefined };
    this.#clients.set(res, listener);
    res.on('close', () => this.remove(res));
    // The newcomer should not wait a whole interval for its first snapshot; a fresh one is shared.
    const latest = this.#latest.get(view);
    if (latest && Date.now() - latest.at < this.#intervalMs) {
      res.write(this.#fullFrame(latest.payload));
      listener.last = latest.payload;
    } else void this.#send([res]);
    this.#timer ??= setInterval(() => void this.#send([...this.#clients.keys()]), this.#intervalMs);
  }

  remove(res: ServerResponse): void {
    const listener = this.#clients.get(res);
    this.#clients.delete(res);
    if (listener && ![...this.#clients.values()].some((l) => l.view === listener.view))
      this.#latest.delete(listener.view);
    if (this.#clients.size === 0 && this.#timer) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }

  #frame(data: unknown): string {
    return `event: overview\ndata: ${JSON.stringify(data)}\n\n`;
  }

  #fullFrame(payload: P): string {
    let frame = this.#fullFrames.get(payload);
    if (frame === undefined) {
      frame = this.#frame(this.#collector.full(payload));
      this.#fullFrames.set(payload, frame);
    }
    return frame;
  }

  /**
   * One collection at a time: a caller whose views the one under way covers waits for it; another
   * waits for it to end, then starts one for every view listened to (later callers join that one).
   */
  #collect(views: readonly string[]): Promise<ReadonlyMap<string, P> | undefined> {
    const current = this.#inFlight;
    if (current && views.every((v) => current.views.has(v))) return current.result;
    const all = new Set([...views, ...[...this.#clients.values()].map((l) => l.view)]);
    const result = (current?.result ?? Promise.resolve(undefined)).then(() => this.#run([...all]));
    const entry = { views: all, result };
    this.#inFlight = entry;
    void result.finally(() => {
      if (this.#inFlight === entry) this.#inFlight = undefined;
    });
    return result;
  }

  async #run(views: readonly string[]): Promise<ReadonlyMap<string, P> | undefined> {
    this.#collections += 1;
    try {
      const payloads = await this.#collector.collect(views);
      const at = Date.now();
      for (const [view, payload] of payloads) this.#latest.set(view, { payload, at });
      return payloads;
    } catch (err) {
      this.#logger.warn({ err: (err as Error).message }, 'live overview failed');
      return undefined;
    }
  }

  async #send(targets: readonly ServerResponse[]): Promise<void> {
    const views = [...new Set(targets.map((res) => this.#clients.get(res)?.view ?? ''))];
    const payloads = await this.#collect(views);
    // Listeners of one view hold the same last payload: each frame is built once per (view, base).
    const built = new Map<string, Map<P | undefined, string>>();
    for (const res of targets) {
      const listener = this.#clients.get(res);
      if (!listener || res.writableEnded) continue;
      if (!payloads) {
        res.write(
          `event: problem\ndata: ${JSON.stringify({ message: 'overview unavailable, retrying' })}\n\n`,
        );
        continue;
      }
      const next = payloads.get(listener.view);
      // A tick while the previous collection still ran got that collection: nothing new to send.
      if (next === undefined || next === listener.last) continue;
      const byBase = built.get(listener.view) ?? new Map<P | undefined, string>();
      built.set(listener.view, byBase);
      let frame = byBase.get(listener.last);
      if (frame === undefined) {
        frame =
          listener.last === undefined
            ? this.#fullFrame(next)
            : this.#frame(this.#collector.diff(listener.last, next));
        byBase.set(listener.last, frame);
      }
      res.write(frame);
      listener.last = next;
    }
  }

  close(): void {
    for (const res of this.#clients.keys()) res.end();
    this.#clients.clear();
    this.#latest.clear();
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
  }
}
