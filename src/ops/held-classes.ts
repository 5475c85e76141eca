// Held learners by pre-flight class, for the overview: `plan --check --apply` records an unknown or
// no-user learner `held` with its class as the first word of its message (preflight-apply.ts). Read for
// the organizations of the page that hold some, at most HELD_READ of them (the newest), so a card costs
// one index read and one HMGET whatever the cohort.
import type { AppContext } from '../app/context.ts';

export const HELD_READ = 500;

/** Class -> count among the newest HELD_READ held learners; null when none is held. */
export async function heldClasses(
  ctx: AppContext,
  org: string,
  held: number,
): Promise<Record<string, number> | null> {
  if (held <= 0) return null;
  const ids = await ctx.store.bucketPage(org, 'held', 0, HELD_READ);
  const records = await ctx.store.getMany(org, ids);
  const out: Record<string, number> = {};
  for (const r of records) {
    if (!r || r.b !== 'held') continue;
    const cls = /^([a-z-]+):/.exec(r.m ?? '')?.[1] ?? 'other';
    out[cls] = (out[cls] ?? 0) + 1;
  }
  return out;
}
