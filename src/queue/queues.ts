// One BullMQ queue per organization (decision 6): a spent daily budget pauses only that
// organization's queue. Queue names carry the organization's {hash tag} (see keys.ts).
import { Queue, type JobsOptions, type Telemetry } from 'bullmq';
import type { RedisClient } from '../redis/client.ts';
import type { Config } from '../core/config.ts';
import type { Keys } from '../core/keys.ts';
import { queueTelemetry } from '../core/tracing.ts';
import type { TransferJob } from './job.ts';

export type TransferQueue = Queue<TransferJob, unknown, string>;

export function defaultJobOptions(config: Pick<Config, 'attempts' | 'backoffMs'>): JobsOptions {
  return {
    attempts: config.attempts,
    // Exponential backoff with jitter, so a fleet retrying a failing service does not return in lockstep.
    backoff: { type: 'exponential', delay: config.backoffMs, jitter: 0.5 },
    // The outcome store is the record of a finished learner; finished jobs would only cost memory.
    // Failed jobs are kept a while for bull-board; `retry` removes them before re-adding.
    removeOnComplete: true,
    removeOnFail: { count: 10_000, age: 30 * 86_400 },
  };
}

export class QueueSet {
  readonly #queues = new Map<string, TransferQueue>();
  readonly #redis: RedisClient;
  readonly #keys: Keys;
  readonly #jobOptions: JobsOptions;

  readonly #onError: (org: string, err: Error) => void;

  /**
   * `onError` hears a queue's connection errors (a Redis restart): without a listener BullMQ prints
   * them with a stack trace on stderr.
   */
  constructor(
    redis: RedisClient,
    keys: Keys,
    config: Pick<Config, 'attempts' | 'backoffMs'>,
    onError: (org: string, err: Error) => void = () => {},
  ) {
    this.#onError = onError;
    this.#redis = redis;
    this.#keys = keys;
    this.#jobOptions = defaultJobOptions(config);
  }

  get(org: string): TransferQueue {
    let q = this.#queues.get(org);
    if (!q) {
      q = new Queue<TransferJob, unknown, string>(this.#keys.queueName(org), {
        connection: this.#redis,
        prefix: this.#keys.prefix,
        defaultJobOptions: this.#jobOptions,
        // Tracing on: the enqueue's span context travels in the job (docs/tracing.md); off: none at all.
        telemetry: queueTelemetry<Telemetry>(),
      });
      q.on('error', (err: Error) => this.#onError(org, err));
      this.#queues.set(org, q);
    }
    return q;
  }

  /** The connection the queues use, for reads of BullMQ's own keys (active list, failed set). */
  get redis(): RedisClient {
    return this.#redis;
  }

  get jobOptions(): JobsOptions {
    return this.#jobOptions;
  }

  async close(): Promise<void> {
    await Promise.all([...this.#queues.values()].map((q) => q.close()));
    this.#queues.clear();
  }
}

export type JobCounts = {
  waiting: number;
  active: number;
  delayed: number;
  failed: number;
  prioritized: number;
};

export async function jobCounts(queue: TransferQueue): Promise<JobCounts> {
  const c = await queue.getJobCounts('waiting', 'active', 'delayed', 'failed', 'prioritized');
  return {
    waiting: c.waiting ?? 0,
    active: c.active ?? 0,
    delayed: c.delayed ?? 0,
    failed: c.failed ?? 0,
    prioritized: c.prioritized ?? 0,
  };
}
