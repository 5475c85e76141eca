// An organization's service judged unreachable from network errors in a row: its transfers wait a block
// that grows, without using attempts, and after a block one job of this process asks whether it is back.
import type { TransferOutcome } from '../api/outcome.ts';
import type { Config } from '../core/config.ts';
import { OUTCOMES, UNREACHABLE_STREAK } from '../outcomes/codes.ts';

/** First block of an unreachable service: the backoff, kept between 100 ms and 5 s; doubles up to a minute. */
function unreachableBlockMs(config: Readonly<Config>, level: number): number {
  const base = Math.max(100, Math.min(5_000, config.backoffMs));
  return Math.min(60_000, base * 2 ** Math.min(20, level - 1));
}

interface OrgState {
  streak: number;
  level: number;
  until: number;
  probe: Promise<void> | undefined;
}

/** The probe a job holds: released once its answer is in. */
export interface Probe {
  release(): void;
}

export class Unreachable {
  readonly #config: Readonly<Config>;
  /**
   * Per organization: network errors in a row, how far the unreachable block has grown, when it ends,
   * and whether a job of this process is probing the service now (after a block, one request asks
   * whether it is back while the others wait: otherwise every concurrency slot would probe at once).
   */
  readonly #orgs = new Map<string, OrgState>();

  constructor(config: Readonly<Config>) {
    this.#config = config;
  }

  /** The org block (ms) when this outcome shows the service unreachable, else undefined. */
  blockMsAfter(org: string, outcome: TransferOutcome): number | undefined {
    if (outcome.code !== 'network-error') {
      this.#orgs.delete(org); // an answer: the service is reachable
      return undefined;
    }
    const s = this.#orgs.get(org) ?? { streak: 0, level: 0, until: 0, probe: undefined };
    this.#orgs.set(org, s);
    s.streak++;
    if (OUTCOMES[outcome.code].whenUnreachable !== 'wait-org') return undefined;
    if (outcome.maybeDelivered && s.streak < UNREACHABLE_STREAK) return undefined;
    const now = Date.now();
    // Requests in flight together fail together: only one sent after the last block ended grows it.
    if (now >= s.until) s.level++;
    const ms = unreachableBlockMs(this.#config, s.level);
    s.until = Math.max(s.until, now + ms);
    return ms;
  }

  /**
   * After a block for an unreachable service, one job of this process asks whether it is back; the
   * others wait for that answer here, then go through acquire (which sees a renewed block if not).
   * Returns the probe this job holds, if it is the one that asks.
   */
  async awaitProbe(org: string): Promise<Probe | undefined> {
    for (let down = this.#orgs.get(org); down && down.level > 0; down = this.#orgs.get(org)) {
      if (down.probe) {
        await down.probe;
        continue;
      }
      let end: () => void = () => {};
      down.probe = new Promise<void>((resolve) => (end = resolve));
      const state = down;
      return {
        release: () => {
          state.probe = undefined;
          end();
        },
      };
    }
    return undefined;
  }
}
