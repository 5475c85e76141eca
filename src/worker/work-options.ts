// What `work` is asked to do (WorkOptions) and what it says when it stops (WorkResult).
import type { OutcomeEvent, ProcessorDeps } from './processor-context.ts';
import type { WriteGateLike } from './recorder.ts';
import type { ControlWorkerOptions } from './control-worker.ts';
import type { LaneDispatcherOptions } from './lanes.ts';
import type { RepairReport } from '../ops/actions/repair.ts';
import type { AwaitingApproval, HaltedOrg } from './until-idle.ts';

export interface WorkOptions {
  orgs: readonly string[];
  concurrency: number;
  /** Exit when no job is waiting, delayed or active in the served queues. */
  untilIdle: boolean;
  idleCheckMs?: number;
  /** BullMQ lock: a job whose worker died is taken back after about this long. */
  lockDurationMs?: number;
  stalledIntervalMs?: number;
  onOutcome?: (e: OutcomeEvent) => void;
  /** Every refused permit, with its scope, for notifications. */
  onRefused?: ProcessorDeps['onRefused'];
  /** The error budget halted an organization or paused a token in this process's step: notifications. */
  onHalt?: ProcessorDeps['onHalt'];
  /** The share of a canary's failures at which its run is not approved by itself (HALT_AT; default 50%). */
  canaryHaltShare?: number;
  /** Each repair sweep's report per organization (metrics: learners found stranded). */
  onRepair?: (r: RepairReport) => void;
  /**
   * The write gate (Redis takes writes?): no call is sent while it is closed, and refused writes close it.
   * Absent: only the recorder's own retries stand between a refusing Redis and a lost response.
   */
  gate?: (WriteGateLike & { waitOpen(): Promise<void> }) | undefined;
  /** false: no write-ahead spool (the benchmark's baseline only; a response could then be lost). */
  spool?: boolean;
  /** Serve the control queue (scheduled reconciles) too: `work` does unless --no-control. */
  control?: ControlWorkerOptions | false;
  /**
   * Serve the organizations of ctx.tokens as it changes (a token file read again): one added is served at
   * once, one left without a token is detached. Off, the process serves `orgs` only.
   */
  followTokens?: boolean;
  /** The dispatcher's timings and its LanesDue (tests), and a listener of its attaches and detaches. */
  lanes?: Partial<
    Pick<
      LaneDispatcherOptions,
      'due' | 'leaseMs' | 'quantumMs' | 'safetyMs' | 'drainGraceMs' | 'maxAttached' | 'onChange'
    >
  >;
}

export interface WorkResult {
  /** Final outcomes this process recorded. */
  succeeded: number;
  failed: number;
  /** Organizations that stopped because every token was refused (401) while work waited. */
  unauthorizedOrgs: string[];
  /**
   * Organizations the error budget halted while their work waited (with untilIdle: the work left was only
   * theirs and that of refused organizations), with the halt's reason.
   */
  haltedOrgs: HaltedOrg[];
  reason: 'idle' | 'stopped' | 'unauthorized' | 'halted';
  /**
   * With untilIdle, at idle: learners in a failure state in the runs this process worked on (those with
   * learners waiting when it started, and those it recorded outcomes for), in the organizations it
   * served, whichever process finished them. A nightly `work --until-idle` exits non-zero on these.
   */
  runFailures: number;
  /**
   * With untilIdle, at idle: the runs it worked on (or found waiting) whose learners await approval after
   * their canary: the work is not over, a person must approve (`approve --run ID`).
   */
  awaitingApproval: AwaitingApproval[];
}
