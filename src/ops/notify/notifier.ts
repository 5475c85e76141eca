// The notifier of a `work` process (docs/notifications.md): hooks on the transfer path only note in
// memory (runs.ts, stuck.ts); time-based events come from one look per interval (watch.ts); every
// event is sent once for the fleet (send.ts).
import type { AppContext } from '../../app/context.ts';
import type { RefusalScope } from '../../limiter/types.ts';
import { orgHalted, tokenRefused } from './events.ts';
import { StuckNotes } from './stuck.ts';
import { RunWatch } from './runs.ts';
import { WebhookSender, type NotifyStats } from './send.ts';
import { FleetWatch } from './watch.ts';

export interface NotifierOptions {
  /** Tests: shorter waits between tries, a shorter bound on one try, a shorter look delay. */
  retryMs?: readonly number[];
  timeoutMs?: number;
  runDelayMs?: number;
}

/** What the notifier reads of an outcome `work` recorded. */
export interface NotedOutcome {
  org: string;
  runId: string;
  code: string;
  final: boolean;
  tokenId: string;
}

/** How long a stop waits for what is still to be sent (a run's end said just before the exit). */
export const STOP_DRAIN_MS = 10_000;

export class Notifier {
  readonly #ctx: AppContext;
  readonly #sender: WebhookSender;
  readonly #runs: RunWatch;
  readonly #watch: FleetWatch;
  readonly #stuck: StuckNotes;
  #timer: NodeJS.Timeout | undefined;
  #looking = false;

  /** Undefined without NOTIFY_WEBHOOK_URL. */
  static fromContext(ctx: AppContext, options: NotifierOptions = {}): Notifier | undefined {
    return ctx.config.notifyWebhookUrl ? new Notifier(ctx, ctx.config.notifyWebhookUrl, options) : undefined;
  }

  constructor(ctx: AppContext, url: string, options: NotifierOptions = {}) {
    this.#ctx = ctx;
    const { config } = ctx;
    this.#sender = new WebhookSender({
      url,
      redis: ctx.redis,
      keys: ctx.keys,
      logger: ctx.logger,
      userAgent: config.userAgent,
      ...(options.retryMs ? { retryMs: options.retryMs } : {}),
      ...(options.timeoutMs ? { timeoutMs: options.timeoutMs } : {}),
    });
    const submit = this.#sender.submit.bind(this.#sender);
    this.#runs = new RunWatch({
      runs: ctx.runs,
      store: ctx.store,
      logger: ctx.logger,
      failureShare: config.notifyFailureShare,
      submit,
      ...(options.runDelayMs !== undefined ? { delayMs: options.runDelayMs } : {}),
    });
    this.#stuck = new StuckNotes(ctx.keys.notifyStuck());
    this.#watch = new FleetWatch({
      redis: ctx.redis,
      keys: ctx.keys,
      budget: ctx.budget,
      tokens: ctx.tokens,
      logger: ctx.logger,
      blockedAfterMs: config.notifyBlockedAfterMs,
      stallAfterMs: config.notifyStallAfterMs,
      submit,
    });
  }

  get stats(): NotifyStats {
    return this.#sender.stats;
  }

  start(): void {
    const { logger } = this.#ctx;
    logger.info(
      { webhook: this.#sender.target, everyMs: this.#watch.intervalMs },
      `notifications on: posting to ${this.#sender.target}`,
    );
    if (this.#watch.intervalMs <= 0) return;
    this.#timer = setInterval(() => {
      if (this.#looking) return;
      this.#looking = true;
      this.#stuck
        .write(this.#ctx.redis)
        .then(() => this.#watch.tick())
        .catch((err: Error) => logger.warn({ err: err.message }, 'notifications: the fleet look failed'))
        .finally(() => (this.#looking = false));
    }, this.#watch.intervalMs);
    this.#timer.unref();
  }

  /** Called with every outcome `work` records. No I/O, never throws: the transfer goes on at once. */
  noteOutcome(e: NotedOutcome): void {
    try {
      if (e.code === 'unauthorized') this.#sender.submit(tokenRefused(e.org, e.tokenId, new Date()));
      if (e.final) this.#runs.note(e.runId, e.org);
      if (this.#watch.intervalMs > 0) this.#stuck.moved(e.org);
    } catch (err) {
      this.#ctx.logger.warn({ err: (err as Error).message }, 'notifications: an outcome could not be noted');
    }
  }

  /** What `work` hooks on its workers besides the outcomes: refused permits, halts. */
  workHooks(): {
    onRefused: Notifier['noteRefused'];
    onHalt: Notifier['noteHalt'];
  } {
    return { onRefused: this.noteRefused.bind(this), onHalt: this.noteHalt.bind(this) };
  }

  /** The error budget halted the organization (tokenId null) or paused a token: said at once, once. */
  noteHalt(org: string, tokenId: string | null, reason: string): void {
    try {
      this.#sender.submit(orgHalted(org, tokenId, reason, new Date()));
    } catch (err) {
      this.#ctx.logger.warn({ err: (err as Error).message }, 'notifications: a halt could not be noted');
    }
  }

  /** A permit refused, and why: a pause or a block is noted (no I/O, never throws). */
  noteRefused(org: string, scope: RefusalScope, indefinite: boolean): void {
    if (this.#watch.intervalMs > 0) this.#stuck.refused(org, scope, indefinite);
  }

  /** The last look at the runs noted, what is queued sent (within `drainMs`), then stop. */
  async stop(drainMs = STOP_DRAIN_MS): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#runs.look().catch(() => {});
    this.#runs.close();
    await this.#sender.idle(drainMs);
    await this.#sender.close();
  }
}
