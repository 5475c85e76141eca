// The controls of each organization as an operator sees them: limits, pause, newest changes in words.
import type { AppContext } from '../../app/context.ts';
import { readChanges, type ChangeEntry } from '../../limiter/control-log.ts';
import { POLICY_RECHECK_MS } from '../../limiter/policy.ts';
import { collectLimits, describeChange, type OrgLimits } from './limits.ts';

/** Change log entries shown per organization, newest first. */
export const CHANGES_SHOWN = 20;

export interface ChangeRow extends ChangeEntry {
  /** What changed, in words ("perToken 20/2s -> 5/2s"). */
  summary: string;
}

/** One organization on the controls page: `limits show --json`'s fields, and its newest changes. */
export interface OrgControls extends OrgLimits {
  changes: ChangeRow[];
}

export interface ControlsOverview {
  at: string;
  readOnly: boolean;
  /** Every worker applies a change within this (ms). */
  applyWithinMs: number;
  orgs: OrgControls[];
}

/** A change log entry in words: the before/after of limits and pauses, the learners of an urgent move. */
export function summarizeChange(e: ChangeEntry): string {
  const d = e.details;
  if ((e.action === 'retry' || e.action === 'held.release') && typeof d.requeued === 'number')
    return summarizeRetry(d);
  if ('before' in d || 'after' in d) return describeChange(d);
  return Object.entries(d)
    .map(([k, v]) => `${k} ${Array.isArray(v) ? v.map(shown).join(', ') || '-' : shown(v)}`)
    .join(', ');
}

const counted = (v: unknown) =>
  Object.entries((v ?? {}) as Record<string, unknown>)
    .map(([k, n]) => `${String(n)} ${k}`)
    .join(', ');

/** A retry in words: "re-queued 37 (30 server-error, 7 network-error) of run R (37); filter ...". */
function summarizeRetry(d: Record<string, unknown>): string {
  const filter = Object.entries((d.filter ?? {}) as Record<string, unknown>)
    .filter(([, v]) => v !== undefined && v !== null)
    .map(([k, v]) => `${k} ${shown(v)}`)
    .join(', ');
  const runs = Object.entries((d.runs ?? {}) as Record<string, unknown>)
    .map(([r, n]) => `${r} (${String(n)})`)
    .join(', ');
  return (
    `re-queued ${String(d.requeued)} (${counted(d.byCode)})` +
    (runs ? ` of run ${runs}` : '') +
    (filter ? `; filter ${filter}` : '') +
    (d.move ? '; --move' : '')
  );
}

const shown = (v: unknown) => (typeof v === 'object' ? JSON.stringify(v) : String(v));

export async function orgControls(ctx: AppContext, org: string): Promise<OrgControls> {
  const [limits, changes] = await Promise.all([
    collectLimits(ctx, org),
    readChanges(ctx.redis, ctx.keys, { count: CHANGES_SHOWN, org }),
  ]);
  return { ...limits, changes: changes.map((e) => ({ ...e, summary: summarizeChange(e) })) };
}

export async function collectControls(
  ctx: AppContext,
  orgs: readonly string[],
  readOnly: boolean,
): Promise<ControlsOverview> {
  const out: OrgControls[] = [];
  for (const org of orgs) out.push(await orgControls(ctx, org));
  return {
    at: new Date().toISOString(),
    readOnly,
    applyWithinMs: POLICY_RECHECK_MS,
    orgs: out,
  };
}
