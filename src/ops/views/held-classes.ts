// Held learners by pre-flight class (the first word of their message), for the overview; at most
// HELD_READ read per organization.
import type { AppContext } from '../../app/context.ts';

export const HELD_READ = 500;

/**
 * The last classes read per context and organization, with the held count they were read at. A held
 * learner's class never changes while it is held, and the set changes by holds (apply) and releases
 * (retry, cancel), each of which moves the count: so the live overview, which asks every interval,
 * reads the records again only when the count moved, not 500 records a card every 2 s.
 */
const lastRead = new WeakMap<AppContext, Map<string, { held: number; classes: Record<string, number> }>>();

/** Class -> count among the newest HELD_READ held learners; null when none is held. */
export async function heldClasses(
  ctx: AppContext,
  org: string,
  held: number,
): Promise<Record<string, number> | null> {
  if (held <= 0) return null;
  let byOrg = lastRead.get(ctx);
  if (!byOrg) lastRead.set(ctx, (byOrg = new Map()));
  const known = byOrg.get(org);
  if (known?.held === held) return known.classes;
  const classes = await readClasses(ctx, org);
  byOrg.set(org, { held, classes });
  return classes;
}

async function readClasses(ctx: AppContext, org: string): Promise<Record<string, number>> {
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
