// A Learner API of our own (docs/learner-api.md) for the demo, tests and benchmarks: a real HTTP
// server with seeded data, the spec's bodies and errors, optional rate limits, fault injection,
// and a record of every request to assert on.
import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.ts';
import type { SimContext } from './context.ts';
import { DEFAULT_LEARNERS, DEFAULT_ORGANIZATIONS, DEFAULT_SEED, DEFAULT_TOKENS } from './defaults.ts';
import { FaultInjector } from './faults.ts';
import { SimLimiter } from './limits.ts';
import { stream } from './random.ts';
import { RequestLog } from './record.ts';
import { seedLearners } from './seed.ts';
import { SimState } from './state.ts';
import { TokenRegistry } from './tokens.ts';
import type {
  LimitViolation,
  RepeatMode,
  RequestRecord,
  SimFaults,
  SimLearner,
  SimLimits,
  SimOrg,
  SimulatorOptions,
  TransferResultBody,
} from './types.ts';
import { findOverlaps, type Overlap } from './overlaps.ts';
import { findViolations } from './violations.ts';

export type * from './types.ts';
export {
  DEFAULT_LEARNERS,
  DEFAULT_ORGANIZATIONS,
  DEFAULT_SEED,
  DEFAULT_TOKENS,
  PER_PAGE,
} from './defaults.ts';
import { LearnerTransferError } from '../core/errors.ts';

export interface Simulator {
  /** Base URL after listen(), like http://127.0.0.1:PORT (no trailing slash); '' before. */
  readonly url: string;
  listen(port?: number, host?: string): Promise<string>;
  close(): Promise<void>;
  readonly app: FastifyInstance;
  /** Every request in arrival order; entries fill in as requests are counted and answered. */
  readonly record: readonly RequestRecord[];
  learner(id: number): SimLearner | undefined;
  ownerChanges(learnerId: number): number;
  /** Transfer calls for one learner that were in flight at the same time (none is the goal). */
  overlaps(): Overlap[];
  transfersOf(learnerId: number): TransferResultBody[];
  setFaults(f: SimFaults): void;
  setRepeatMode(m: RepeatMode): void;
  setLimits(l: SimLimits | undefined): void;
  /** From now on that token answers 401. */
  revokeToken(token: string): void;
  /**
   * Windows in which counted, non-429 transfers exceeded perToken / perOrg of the current limits
   * (or of `limits`). Rolling by default: the stricter check (violations.ts).
   */
  violations(window?: 'rolling' | 'fixed', limits?: SimLimits): LimitViolation[];
  tokenOrg(token: string): string | undefined;
  /**
   * Test hook for a list that changes while it is read: inserts a learner (id = largest + 1) at
   * `position` (0-based; default the end) and returns its id. Later learners shift one on.
   */
  insertLearner(options: {
    position?: number;
    org: string;
    userId?: number | null;
    isActive?: number;
  }): number;
  /** Test hook: removes a learner from the list; later learners shift one position back. */
  removeLearner(id: number): boolean;
  /**
   * Test hook: from now on, transfer calls are handled but not answered (in flight, status 0) until
   * the returned function is called, so an injected fault surely meets calls in flight.
   */
  holdAnswers(): () => void;
}

function checkOrganizations(orgs: readonly SimOrg[]): void {
  if (orgs.length === 0)
    throw new LearnerTransferError('LT_SIMULATOR_OPTIONS', 'simulator: organizations must not be empty');
  const ids = new Set(orgs.map((o) => o.id));
  const keys = new Set(orgs.map((o) => o.key));
  if (ids.size !== orgs.length || keys.size !== orgs.length) {
    throw new LearnerTransferError(
      'LT_SIMULATOR_OPTIONS',
      'simulator: organization ids and keys must be unique',
    );
  }
}

function checkLimits(limits: SimLimits | undefined): void {
  for (const [name, rate] of [
    ['perToken', limits?.perToken],
    ['perOrg', limits?.perOrg],
  ] as const) {
    if (rate && (!Number.isSafeInteger(rate.max) || rate.max < 1 || !(rate.windowMs > 0))) {
      throw new LearnerTransferError(
        'LT_SIMULATOR_OPTIONS',
        `simulator limits.${name}: expected max >= 1 and windowMs > 0, got ${JSON.stringify(rate)}`,
      );
    }
  }
}

/** Simulator.holdAnswers: the transfer route waits on ctx.answersHeld until it is released. */
function holdAnswers(ctx: SimContext): () => void {
  let release = () => {};
  const held = new Promise<void>((resolve) => {
    release = () => {
      if (ctx.answersHeld === held) ctx.answersHeld = undefined;
      resolve();
    };
  });
  ctx.answersHeld = held;
  return release;
}

export function createSimulator(options: SimulatorOptions = {}): Simulator {
  const seed = options.seed ?? DEFAULT_SEED;
  const orgs = options.organizations ?? DEFAULT_ORGANIZATIONS.map((o) => ({ ...o }));
  checkOrganizations(orgs);
  const count = options.learners ?? DEFAULT_LEARNERS;
  if (!Number.isSafeInteger(count) || count < 0) {
    throw new LearnerTransferError(
      'LT_SIMULATOR_OPTIONS',
      `simulator learners: expected a whole number >= 0, got ${count}`,
    );
  }
  const log = new RequestLog();
  const limiter = new SimLimiter();
  checkLimits(options.limits);
  limiter.set(options.limits, log.entries);
  const ctx: SimContext = {
    orgs,
    state: new SimState(seedLearners(seed, count, orgs), seed),
    tokens: new TokenRegistry(options.tokens ?? DEFAULT_TOKENS, orgs),
    limiter,
    faults: new FaultInjector(seed, options.faults),
    log,
    forbidden: new Set(options.forbiddenLearnerIds ?? []),
    failing: new Set(options.failingLearnerIds ?? []),
    repeatMode: options.repeatMode ?? 'error',
    repeatRandom: stream(seed, 'repeat'),
  };
  const app = buildApp(ctx, options.logger ?? false, options.https);
  let url = '';

  return {
    get url() {
      return url;
    },
    async listen(port = 0, host = '127.0.0.1') {
      await app.listen({ port, host });
      const address = app.server.address();
      const actualPort = typeof address === 'object' && address ? address.port : port;
      url = `${options.https ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${actualPort}`;
      return url;
    },
    async close() {
      await app.close();
    },
    app,
    record: log.entries,
    learner: (id) => ctx.state.learner(id),
    ownerChanges: (id) => ctx.state.ownerChanges(id),
    overlaps: () => findOverlaps(log.entries),
    transfersOf: (id) => ctx.state.transfersOf(id),
    setFaults: (f) => ctx.faults.set(f),
    setRepeatMode(m) {
      ctx.repeatMode = m;
    },
    setLimits(l) {
      checkLimits(l);
      limiter.set(l, log.entries);
    },
    revokeToken: (token) => ctx.tokens.revoke(token),
    violations: (window, limits) => findViolations(log.entries, limits ?? limiter.current, window),
    tokenOrg: (token) => ctx.tokens.orgOf(token),
    insertLearner(o) {
      const org = orgs.find((x) => x.key === o.org);
      if (!org)
        throw new LearnerTransferError(
          'LT_SIMULATOR_OPTIONS',
          `simulator insertLearner: unknown organization '${o.org}'`,
        );
      return ctx.state.insertLearner(o.position ?? ctx.state.total, {
        organizationId: org.id,
        isActive: o.isActive ?? 1,
        userId: o.userId,
      });
    },
    removeLearner: (id) => ctx.state.removeLearner(id),
    holdAnswers: () => holdAnswers(ctx),
  };
}
