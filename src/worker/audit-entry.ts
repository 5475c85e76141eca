// The audit entry of one answer that may have changed something (every 200, every unreadable body): a
// readable body verbatim, another as its prefix, length and hash (body-archive.ts).
import type { TransferOutcome } from '../api/outcome.ts';
import type { Logger, Scrub } from '../core/log.ts';
import { OUTCOMES } from '../outcomes/codes.ts';
import type { FinishArgs } from '../outcomes/store.ts';
import { keepOf, type BodyArchive } from './body-archive.ts';

/** The most of a response body kept in the audit stream (a transfer result is a few KB). */
const MAX_AUDIT_BODY = 256 * 1024;

export async function auditEntryOf(
  outcome: TransferOutcome,
  ids: { attemptId: string; transferId: string | undefined; org: string; learnerId: number },
  deps: { scrub: Scrub; archive?: BodyArchive | undefined; logger: Logger },
): Promise<FinishArgs['audit']> {
  const raw =
    (outcome as { raw?: string }).raw ?? (outcome.code === 'bad-response' ? outcome.body : undefined);
  const status = 'status' in outcome ? outcome.status : undefined;
  if (raw === undefined || (status !== 200 && outcome.code !== 'bad-response')) return undefined;
  const { attemptId, transferId } = ids;
  // Scrubbed whole first (the client already did), then cut: a cut never keeps a token's start.
  const text = deps.scrub(raw).slice(0, MAX_AUDIT_BODY);
  // Keyed by the transfer, so the same answer replayed from the spool is kept once. Not a repeat's answer
  // (200 "already associated"): it names the transfer that moved the learner but reports nothing revoked,
  // and keyed by that transfer it would take the place of the transfer's own answer arriving later (a
  // worker frozen past its lease, whose call moved the learner): keyed by its attempt, both are kept.
  const repeat = outcome.code === 'already-in-org';
  const base = {
    key: transferId && !repeat ? `t:${transferId}` : `a:${attemptId}`,
    transferId: transferId ?? '',
  };
  const kind = OUTCOMES[outcome.code].audit;
  if (kind === null) return undefined;
  // Only a body that is not a transfer result is kept as its prefix, length and hash.
  if (outcome.code !== 'bad-response') return { ...base, raw: text, kind };
  const kept = keepOf(text);
  // Best effort: the prefix, length and hash reach Redis whatever the disk says.
  await deps.archive
    ?.keep(kept, text)
    .catch((err: Error) =>
      deps.logger.warn(
        { org: ids.org, learnerId: ids.learnerId, sha256: kept.sha256, err: err.message },
        'could not keep an unreadable body on disk beside the spool (its prefix, length and hash are in the audit)',
      ),
    );
  return {
    ...base,
    raw: kept.prefix,
    kind: 'unreadable',
    reason: deps.scrub(outcome.message),
    body: { bytes: kept.bytes, sha256: kept.sha256 },
  };
}
