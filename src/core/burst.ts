// The pacing burst: how many permits a token's or the organization's bucket holds, as a count
// ("10") or a share of the scope's limit ("10%"), the forms includes/policy.lua's lt_burst
// reads.

export type Burst = { count: number } | { percent: number };

/** Bursts above this count are refused (lt_burst's LT_BURST_MAX_COUNT). */
export const BURST_MAX_COUNT = 1_000_000;

/** The default: a tenth of each limit (docs/pacing.md). `100%` turns pacing off. */
export const DEFAULT_BURST = '10%';

/** "10" or "10%" as a person writes it ("off" and "none" mean 100%); undefined otherwise. */
export function parseBurst(text: string): Burst | undefined {
  const v = text.trim().toLowerCase();
  return v === 'off' || v === 'none' ? { percent: 100 } : decodeBurst(v);
}

/**
 * A burst as stored in the policy hash: exactly the forms lt_burst reads ("N" or "P%"), so a
 * display shows what the limiter applies; undefined otherwise.
 */
export function decodeBurst(text: string): Burst | undefined {
  const share = /^(\d+)%$/.exec(text);
  if (share) {
    const percent = Number(share[1]);
    return percent >= 1 && percent <= 100 ? { percent } : undefined;
  }
  if (!/^\d+$/.test(text)) return undefined;
  const count = Number(text);
  return count >= 1 && count <= BURST_MAX_COUNT ? { count } : undefined;
}

/** The message for a refused burst, naming the variable or flag. */
export function burstMessage(field: string, text: string): string {
  const shown = text.length > 40 ? `${text.slice(0, 37)}...` : text;
  return `${field}: expected a number of permits (like 10), a share of the limit (like 10%) or off, got '${shown}'`;
}

/** The stored form: "10" or "10%". */
export function encodeBurst(burst: Burst): string {
  return 'percent' in burst ? `${burst.percent}%` : String(burst.count);
}
