// What the routes share: the world, its limits and faults, the record; and the checks every
// request passes first (User-Agent, then the token).
import type { FastifyRequest } from 'fastify';
import { setTimeout as sleepMs } from 'node:timers/promises';
import { bodies } from './bodies.ts';
import type { FaultInjector } from './faults.ts';
import type { SimLimiter } from './limits.ts';
import type { Random } from './random.ts';
import type { RequestLog } from './record.ts';
import type { Answer } from './respond.ts';
import type { SimState } from './state.ts';
import type { TokenInfo, TokenRegistry } from './tokens.ts';
import type { RepeatMode, SimOrg } from './types.ts';

export interface SimContext {
  readonly orgs: readonly SimOrg[];
  readonly state: SimState;
  readonly tokens: TokenRegistry;
  readonly limiter: SimLimiter;
  readonly faults: FaultInjector;
  readonly log: RequestLog;
  readonly forbidden: ReadonlySet<number>;
  readonly failing: ReadonlySet<number>;
  repeatMode: RepeatMode;
  /** Seeded coin for repeatMode 'mixed'. */
  readonly repeatRandom: Random;
  /** While set (Simulator.holdAnswers), transfer answers wait for it: calls stay in flight. */
  answersHeld?: Promise<void>;
}

export async function sleep(ms: number): Promise<void> {
  if (ms > 0) await sleepMs(ms);
}

/**
 * The spec requires User-Agent (400 without it: the status is our choice, not shown) and a Bearer
 * token (401 for unknown, revoked or missing: not shown either). Accept is tolerated when absent.
 */
export function identify(ctx: SimContext, request: FastifyRequest): TokenInfo | Answer {
  const caller = ctx.tokens.caller(request.headers.authorization);
  const ua = request.headers['user-agent'];
  if (typeof ua !== 'string' || ua.trim() === '') {
    return {
      kind: 'json',
      status: 400,
      body: bodies.badRequest('The User-Agent header is required'),
      result: 'bad-request',
    };
  }
  if (!caller.ok) return { kind: 'json', status: 401, body: bodies.unauthorized(), result: 'unauthorized' };
  return caller.info;
}

export function isAnswer(x: TokenInfo | Answer): x is Answer {
  return 'kind' in x;
}
