// What every step of a transfer shares within one process: its dependencies, the tokens in force (by
// the non-secret id the limiter chose, following the TokenBook), their scrubber, and unreachable state.
import type { LearnerApiClient } from '../api/client.ts';
import type { TransferOutcome } from '../api/outcome.ts';
import type { Config, TokenRef } from '../core/config.ts';
import { TokenBook } from '../core/token-book.ts';
import { secretScrubber, type Logger, type Scrub } from '../core/log.ts';
import type { Keys } from '../core/keys.ts';
import type { TransferBudget } from '../limiter/index.ts';
import type { RefusalScope } from '../limiter/types.ts';
import type { Bucket } from '../outcomes/record.ts';
import type { OutcomeStore } from '../outcomes/store.ts';
import type { QueueSet } from '../queue/queues.ts';
import type { Claims } from '../claims/claims.ts';
import type { Recorder } from './recorder.ts';
import type { BodyArchive } from './body-archive.ts';
import { Unreachable } from './unreachable.ts';

export interface ProcessorDeps {
  config: Readonly<Config>;
  /** The tokens in force (ctx.tokens); without it, the config's tokens, fixed. */
  tokens?: TokenBook;
  client: LearnerApiClient;
  budget: TransferBudget;
  store: OutcomeStore;
  claims: Claims;
  keys: Keys;
  queues: QueueSet;
  recorder: Recorder;
  /** Resolves when Redis takes writes (the write gate): no call is sent that could not be recorded. */
  waitWritable?: () => Promise<void>;
  /** After the permit and lease are taken: WAIT for a replica, so a failover keeps them. */
  replicated?: (org: string) => Promise<unknown>;
  logger: Logger;
  /** Where the whole of an unreadable body is kept, beside the spool. */
  archive?: BodyArchive;
  /**
   * The limiter refused a permit for `waitMs` (`indefinite`: paused, or every token refused): the
   * dispatcher may detach the organization's worker until then (lanes.ts). True when it did (the worker
   * then stops fetching: no queue-wide sleep is needed).
   */
  onBudgetWait?: (org: string, waitMs: number, indefinite: boolean, askedAtMs: number) => boolean;
  /**
   * The limiter refused a permit (`indefinite`: paused, or every token refused), for notifications
   * (ops/notify/notifier.ts). On the transfer path: no I/O.
   */
  onRefused?: (org: string, scope: RefusalScope, indefinite: boolean) => void;
  /**
   * The error budget halted the organization (tokenId null) or paused one token, in the step that pushed
   * this process's outcome (limiter/breaker.ts): notifications say it once. No I/O.
   */
  onHalt?: (org: string, tokenId: string | null, reason: string) => void;
  /** Called after every recorded outcome (metrics, until-idle accounting, alerts). */
  onOutcome?: (event: OutcomeEvent) => void;
  /**
   * Awaited after a canary learner's final outcome is recorded: the run's auto-approval looks whether
   * the canary is over (ops/actions/canary.ts).
   */
  onCanaryFinal?: (org: string, runId: string) => Promise<unknown>;
}

export interface OutcomeEvent {
  org: string;
  learnerId: number;
  runId: string;
  code: TransferOutcome['code'];
  bucket: Bucket;
  final: boolean;
  tokenId: string;
  durationMs: number;
}

/** What a finished job returns (kept by BullMQ only until removeOnComplete). */
export interface ProcessResult {
  /** `cancelled`: an operator withdrew the learner before its call; the job ends with none. */
  code: 'transferred' | 'already-in-org' | 'cancelled';
  transferId: string | null;
}

export interface ProcessorContext {
  deps: ProcessorDeps;
  /** The tokens in force now, by organization (read at each job, never kept across a change). */
  readonly tokensByOrg: ReadonlyMap<string, readonly TokenRef[]>;
  scrub: Scrub;
  unreachable: Unreachable;
  /** When each organization was last said to have every token refused (401): once a minute. */
  lastAlert: Map<string, number>;
  /** When each organization was last said to be paused: once a minute. */
  lastPauseNote: Map<string, number>;
}

export function processorContext(deps: ProcessorDeps): ProcessorContext {
  const { config } = deps;
  const book = deps.tokens ?? new TokenBook(config.tokens);
  return {
    deps,
    get tokensByOrg() {
      return book.byOrg();
    },
    scrub: secretScrubber(() => book.secrets()),
    unreachable: new Unreachable(config),
    lastAlert: new Map(),
    lastPauseNote: new Map(),
  };
}
