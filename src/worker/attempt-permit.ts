// The permit and the learner's lease one attempt holds from acquire to its record.
import { randomUUID } from 'node:crypto';
import type { Acquired } from '../limiter/index.ts';
import type { FinishArgs, FinishResult } from '../outcomes/store.ts';
import type { Recorder } from './recorder.ts';

export type PermitMode = 'response' | 'abandon' | 'release';

export class AttemptPermit {
  readonly #recorder: Recorder;
  readonly #job: { org: string; learnerId: number; runId: string };
  readonly permit: Acquired;
  /** The lease holder this attempt frees. */
  readonly holder: string;
  /** When the permit was asked for (performance.now()): its in-flight time counts from no earlier. */
  readonly askedAt: number;
  readonly #ttls: { tokenMs: number; orgMs: number };

  constructor(args: {
    recorder: Recorder;
    job: { org: string; learnerId: number; runId: string };
    permit: Acquired;
    holder: string;
    askedAt: number;
    ttls: { tokenMs: number; orgMs: number };
  }) {
    this.#recorder = args.recorder;
    this.#job = args.job;
    this.permit = args.permit;
    this.holder = args.holder;
    this.askedAt = args.askedAt;
    this.#ttls = args.ttls;
  }

  /** The permit as the finish step settles it, in `mode`. */
  settled(mode: PermitMode): NonNullable<FinishArgs['permit']> {
    return {
      tokenId: this.permit.tokenId,
      permitId: this.permit.permitId,
      mode,
      tokenKeyTtlMs: this.#ttls.tokenMs,
      orgKeyTtlMs: this.#ttls.orgMs,
    };
  }

  /**
   * Ends an attempt that made no call (or whose call threw inside the client): the permit released
   * (or, with 'abandon', kept counted to its deadline) and the lease freed, with `update` recorded.
   */
  endWithoutAnswer(
    update?: FinishArgs['update'],
    mode: 'release' | 'abandon' = 'release',
  ): Promise<FinishResult> {
    const { org, learnerId, runId } = this.#job;
    return this.#recorder.record(
      {
        org,
        learnerId,
        runId,
        at: Date.now(),
        attemptId: randomUUID(),
        permit: this.settled(mode),
        holder: this.holder,
        ...(update ? { update } : {}),
      },
      false,
    );
  }

  /** Gives the permit and the lease back, recording nothing. */
  giveBack(): Promise<FinishResult> {
    return this.endWithoutAnswer();
  }
}
