// Feeds the error budget (limiter/breaker.ts, docs/guard-rails.md) with one recorded answer; a halt it
// writes is only said here (the log, onHalt).
import type { SampleKind } from '../limiter/breaker.ts';
import { haltAdvice } from '../limiter/breaker.ts';
import { OUTCOMES } from '../outcomes/codes.ts';
import { shownByList } from '../queue/job.ts';
import type { Admitted } from './admission.ts';
import type { RecordedOutcome } from './outcome-record.ts';
import type { ProcessorContext } from './processor-context.ts';

/** How a recorded answer feeds the sample: only a final outcome of this very answer is one. */
export function sampleKindOf(recorded: RecordedOutcome, source: string): SampleKind {
  const { code } = recorded.outcome;
  if (!recorded.final || recorded.bucket !== code) return null;
  const halt = OUTCOMES[code].halt;
  if (halt === 'not-found') return shownByList(source) ? 'failure' : 'stale';
  return halt;
}

function stormOf(recorded: RecordedOutcome): 'server-error' | 'success' | 'other' | null {
  const { code } = recorded.outcome;
  if (code === 'server-error') return 'server-error';
  if (OUTCOMES[code].success) return 'success';
  // Not an answer of the service about a transfer: a network error, a 429, a 401.
  if (code === 'network-error' || code === 'rate-limited' || code === 'unauthorized') return null;
  return 'other';
}

/** Pushes the answer into the error budget; never throws (a Redis error is logged: the job goes on). */
export async function noteForBreaker(
  ctx: ProcessorContext,
  admitted: Admitted,
  recorded: RecordedOutcome,
): Promise<{ storm: boolean } | undefined> {
  const { org, token, job } = admitted;
  const kind = sampleKindOf(recorded, job.data.source);
  const storm = stormOf(recorded);
  const probeHolder = admitted.grant.permit.probe ? admitted.grant.holder : undefined;
  if (kind === null && storm === null && probeHolder === undefined) return undefined;
  try {
    const r = await ctx.deps.budget.judge({
      org,
      tokenId: token.id,
      kind,
      code: recorded.outcome.code,
      storm,
      probeHolder,
      probeGapMs: ctx.deps.config.backoffMs,
    });
    if (r.halted) {
      const tokenId = r.halted === 'token' ? token.id : null;
      ctx.deps.logger.error(
        { org, tokenId, reason: r.reason, halt: r.halted },
        haltAdvice(org, r.reason, tokenId),
      );
      ctx.deps.onHalt?.(org, tokenId, r.reason);
    }
    return { storm: r.storm };
  } catch (err) {
    ctx.deps.logger.warn(
      { org, err: ctx.scrub((err as Error).message) },
      'the error budget could not be updated for this outcome',
    );
    return undefined;
  }
}
