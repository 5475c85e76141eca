// The pub/sub side of the lanes (lanes.ts): the lanes channel (a producer's nudge) and each served
// organization's limiter events. Channels, not a pattern: an ACL's &PREFIX:* grants them.
import { subscribeReady, type RedisClient } from '../redis/client.ts';

export interface LaneChannelsOptions {
  /** The subscriber connection (pub/sub only). */
  subscriber: RedisClient;
  lanesChannel: string;
  /** An organization's limiter events channel (keys.limiterEvents). */
  limiterChannel: (org: string) => string;
  /** A nudge on the lanes channel, or a reconnect (which may have missed nudges). */
  onNudge(): void;
  /** A limiter event of an organization served. */
  onLimiterEvent(org: string): void;
}

/** SUBSCRIBE and UNSUBSCRIBE take this many channels per command at most. */
const PER_COMMAND = 1000;

export class LaneChannels {
  readonly #o: LaneChannelsOptions;
  /** Limiter event channel -> organization, for the lanes subscribed. */
  #channels = new Map<string, string>();
  readonly #onMessage = (channel: string) => {
    if (channel === this.#o.lanesChannel) return this.#o.onNudge();
    const org = this.#channels.get(channel);
    if (org !== undefined) this.#o.onLimiterEvent(org);
  };
  readonly #onReady = () => this.#o.onNudge();

  constructor(options: LaneChannelsOptions) {
    this.#o = options;
  }

  /** Listens, and subscribes to the lanes channel and the limiter events of `lanes`. */
  async start(lanes: ReadonlySet<string>): Promise<void> {
    const { subscriber } = this.#o;
    subscriber.on('message', this.#onMessage);
    subscriber.on('ready', this.#onReady);
    await subscribeReady(subscriber);
    await subscriber.subscribe(this.#o.lanesChannel);
    await this.follow(lanes);
  }

  /** Subscribes to the limiter events of the lanes served, and no others. */
  async follow(lanes: ReadonlySet<string>): Promise<void> {
    const next = new Map<string, string>();
    for (const lane of lanes) if (!lane.startsWith(':')) next.set(this.#o.limiterChannel(lane), lane);
    const added = [...next.keys()].filter((c) => !this.#channels.has(c));
    const removed = [...this.#channels.keys()].filter((c) => !next.has(c));
    this.#channels = next;
    const { subscriber } = this.#o;
    for (let i = 0; i < added.length; i += PER_COMMAND) {
      await subscribeReady(subscriber);
      await subscriber.subscribe(...added.slice(i, i + PER_COMMAND));
    }
    for (let i = 0; i < removed.length; i += PER_COMMAND) {
      await subscribeReady(subscriber);
      await subscriber.unsubscribe(...removed.slice(i, i + PER_COMMAND));
    }
  }

  /** Stops listening (the subscriptions stay with the connection, which its owner closes). */
  stop(): void {
    this.#o.subscriber.off('message', this.#onMessage);
    this.#o.subscriber.off('ready', this.#onReady);
  }
}
