// Posts notifications to NOTIFY_WEBHOOK_URL from a loop of its own: each event claimed in Redis first,
// so the fleet sends it at most once, retried with backoff (docs/notifications.md, "How they are sent").
import { EnvHttpProxyAgent, request, type Dispatcher } from 'undici';
import type { Keys } from '../../core/keys.ts';
import type { Logger } from '../../core/log.ts';
import { secretScrubber } from '../../core/log.ts';
import { maskWebhookUrl, webhookSecrets } from '../../core/webhook-url.ts';
import type { RedisClient } from '../../redis/client.ts';
import type { NotifyEvent } from './events.ts';

/** Waits before the 2nd, 3rd... try: six tries over about half a minute, then the send has failed. */
export const RETRY_MS: readonly number[] = [1000, 2000, 4000, 8000, 16000];
/** Events waiting to be sent at most; more are dropped and counted. */
export const MAX_QUEUE = 200;
/** Event ids remembered as submitted by this process. */
const MAX_REMEMBERED = 10_000;
/** One try's bound: a receiver that never answers costs this, never a transfer's time. */
export const SEND_TIMEOUT_MS = 10_000;

export interface NotifyStats {
  sent: number;
  /** Sends that failed after every try (or a 4xx). */
  failed: number;
  /** Events another process had claimed already. */
  skipped: number;
  /** Events dropped because the queue was full. */
  dropped: number;
}

export interface SenderOptions {
  url: string;
  redis: RedisClient;
  keys: Keys;
  logger: Logger;
  retryMs?: readonly number[];
  timeoutMs?: number;
  maxQueue?: number;
  userAgent?: string;
}

/** The receiver refused the body itself (a 4xx but 408 and 429): another try would get the same. */
/** The receiver refused the event for good (a 4xx other than 408 and 429): no retry. */
class RefusedError extends Error {}
/** The receiver failed or asked for time (5xx, 408, 429): retried with backoff. */
class RetryLaterError extends Error {}

export class WebhookSender {
  readonly stats: NotifyStats = { sent: 0, failed: 0, skipped: 0, dropped: 0 };
  readonly #o: SenderOptions;
  readonly #queue: NotifyEvent[] = [];
  readonly #dispatcher: Dispatcher;
  readonly #scrub: (text: string) => string;
  readonly #abort = new AbortController();
  #running: Promise<void> | undefined;
  #droppedSaid = false;
  /** Ids this process submitted already: a run looked at again asks Redis no second time. */
  readonly #submitted = new Set<string>();

  constructor(options: SenderOptions) {
    this.#o = options;
    // HTTPS_PROXY, HTTP_PROXY and NO_PROXY as every Node tool reads them: a network whose only way out
    // is a proxy still reaches the receiver.
    this.#dispatcher = new EnvHttpProxyAgent();
    this.#scrub = secretScrubber(webhookSecrets(options.url));
  }

  /** Where it posts, as a message may show it. */
  get target(): string {
    return maskWebhookUrl(this.#o.url);
  }

  /** Queues an event; never waits, never throws. */
  submit(event: NotifyEvent): void {
    if (this.#abort.signal.aborted || this.#submitted.has(event.id)) return;
    // Bounded: forgetting only costs a claim that Redis then refuses.
    if (this.#submitted.size >= MAX_REMEMBERED) this.#submitted.clear();
    this.#submitted.add(event.id);
    if (this.#queue.length >= (this.#o.maxQueue ?? MAX_QUEUE)) {
      this.stats.dropped += 1;
      if (!this.#droppedSaid) {
        this.#droppedSaid = true;
        this.#o.logger.warn(
          { event: event.body.event, id: event.id },
          'notification dropped: too many waiting to be sent (the receiver is slow or down)',
        );
      }
      return;
    }
    this.#queue.push(event);
    this.#running ??= this.#drain().finally(() => (this.#running = undefined));
  }

  /** Resolves when nothing waits to be sent (or after `boundMs`). */
  async idle(boundMs: number): Promise<void> {
    if (!this.#running) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.#running,
      new Promise<void>((r) => {
        timer = setTimeout(r, boundMs);
        timer.unref();
      }),
    ]);
    clearTimeout(timer);
  }

  /** Stops at once: a send in flight is aborted, what waits is dropped. */
  async close(): Promise<void> {
    this.#abort.abort();
    this.#queue.length = 0;
    await this.#running?.catch(() => {});
    await this.#dispatcher.close().catch(() => {});
  }

  async #drain(): Promise<void> {
    for (let e = this.#queue.shift(); e; e = this.#queue.shift()) {
      if (this.#abort.signal.aborted) return;
      await this.#one(e).catch((err: unknown) =>
        this.#o.logger.warn(
          { event: e?.body.event, err: this.#scrub((err as Error)?.message ?? String(err)) },
          'notification not sent',
        ),
      );
    }
  }

  async #one(e: NotifyEvent): Promise<void> {
    const { redis, keys, logger } = this.#o;
    const claimed = await redis.set(keys.notified(e.id), String(process.pid), 'PX', e.ttlMs, 'NX');
    if (claimed !== 'OK') {
      this.stats.skipped += 1;
      return;
    }
    const body = JSON.stringify(e.body);
    const waits = this.#o.retryMs ?? RETRY_MS;
    let last = '';
    for (let attempt = 0; attempt <= waits.length; attempt++) {
      if (attempt > 0 && !(await this.#sleep(waits[attempt - 1] as number))) return;
      try {
        await this.#post(body);
        this.stats.sent += 1;
        logger.info({ event: e.body.event, id: e.id, tries: attempt + 1 }, 'notification sent');
        return;
      } catch (err) {
        if (this.#abort.signal.aborted) return;
        last = this.#scrub((err as Error)?.message ?? String(err));
        // A network error (refused, reset, DNS, the timeout), a 5xx, a 408 or a 429: tried again.
        if (err instanceof RefusedError) break;
      }
    }
    this.stats.failed += 1;
    logger.error(
      { event: e.body.event, id: e.id, err: last, webhook: this.target },
      `notification ${e.body.event} could not be sent: ${last}`,
    );
  }

  async #post(body: string): Promise<void> {
    const signal = AbortSignal.any([
      this.#abort.signal,
      AbortSignal.timeout(this.#o.timeoutMs ?? SEND_TIMEOUT_MS),
    ]);
    const res = await request(this.#o.url, {
      method: 'POST',
      body,
      headers: {
        'content-type': 'application/json',
        'user-agent': this.#o.userAgent ?? 'learner-transfer notifications',
      },
      dispatcher: this.#dispatcher,
      signal,
    });
    // Read (at most a little of) the answer: the socket goes back to the pool.
    await res.body.dump({ limit: 64 * 1024 }).catch(() => {});
    const status = res.statusCode;
    if (status >= 200 && status < 300) return;
    const message = `the receiver answered ${status}`;
    if (status >= 500 || status === 429 || status === 408) throw new RetryLaterError(message);
    throw new RefusedError(message);
  }

  /** False when closed meanwhile. */
  #sleep(ms: number): Promise<boolean> {
    return new Promise((resolve) => {
      if (this.#abort.signal.aborted) return resolve(false);
      const timer = setTimeout(() => resolve(true), ms);
      this.#abort.signal.addEventListener(
        'abort',
        () => {
          clearTimeout(timer);
          resolve(false);
        },
        { once: true },
      );
    });
  }
}
