// When the permits counted now leave their windows, bucketed per step (peek-frees.lua): what
// the ETA's simulation starts from.

/**
 * Steps per window for the frees: a day's window in 2-hour steps, an hour's in 5 min. A permit
 * is said to leave at its step's end, so the ETA starts at most one step late (bench/eta.ts).
 */
export const FREE_STEPS = 12;

/** [ms from now when these permits leave the window (rounded up to the step), how many]. */
export type FreeStep = readonly [inMs: number, count: number];

export interface BudgetFrees {
  org: FreeStep[];
  /** In the order of BudgetView.tokens. */
  tokens: FreeStep[][];
}

function steps(raw: unknown): FreeStep[] {
  if (!Array.isArray(raw)) return [];
  const out: FreeStep[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const inMs = Number(raw[i]);
    const count = Number(raw[i + 1]);
    if (Number.isFinite(inMs) && Number.isFinite(count) && count > 0) out.push([inMs, count]);
  }
  return out;
}

/** peek.lua's frees element: {org steps, token 1 steps, ...}; undefined when absent. */
export function parseFrees(raw: unknown, tokenCount: number): BudgetFrees | undefined {
  if (!Array.isArray(raw)) return undefined;
  return {
    org: steps(raw[0]),
    tokens: Array.from({ length: tokenCount }, (_, i) => steps(raw[i + 1])),
  };
}
