// The error budget's rule (docs/guard-rails.md), one parser for HALT_AT / HALT_SAMPLE, the
// `limits set` flags and the stored policy fields.

/** Defaults when neither the environment nor the policy says otherwise. */
export const DEFAULT_HALT_AT = 50;
export const DEFAULT_HALT_SAMPLE = 20;
/** HALT_STORM: how long a 5xx storm may last before it halts the organization; 0 is never. */
export const DEFAULT_HALT_STORM = '30m';
/**
 * The probes in a row a storm needs besides its time (a storm flag left over a stop is not
 * enough).
 */
export const HALT_STORM_MIN_PROBES = 5;

/** The sample's bounds: below 2 a part-full sample is one call; above, memory for nothing. */
export const HALT_SAMPLE_MIN = 2;
export const HALT_SAMPLE_MAX = 1000;

/** The halt share: a percent 1..100, or 'off' (the organization never halts on its sample). */
export type HaltAt = number | 'off';

/** "50%", "50", "0.5" or "off"; undefined otherwise (each caller words its error). */
export function parseHaltAt(text: string): HaltAt | undefined {
  const t = text.trim().toLowerCase();
  if (t === 'off') return 'off';
  const percent = /^(\d+(?:\.\d+)?)\s*%$/.exec(t);
  if (percent) {
    const p = Number(percent[1]);
    return p >= 1 && p <= 100 ? p : undefined;
  }
  if (/^0?\.\d+$/.test(t)) {
    const p = Number(t) * 100;
    return p >= 1 && p <= 100 ? Math.round(p * 1000) / 1000 : undefined;
  }
  if (/^\d+$/.test(t)) {
    const p = Number(t);
    return p >= 1 && p <= 100 ? p : undefined;
  }
  return undefined;
}

/** A whole number of outcomes, HALT_SAMPLE_MIN..HALT_SAMPLE_MAX; undefined otherwise. */
export function parseHaltSample(text: string): number | undefined {
  const t = text.trim();
  if (!/^\d+$/.test(t)) return undefined;
  const n = Number(t);
  return n >= HALT_SAMPLE_MIN && n <= HALT_SAMPLE_MAX ? n : undefined;
}

export function formatHaltAt(at: HaltAt): string {
  return at === 'off' ? 'off' : `${at}%`;
}

export const HALT_AT_EXPECTED = 'a share of the sample like 50% (1% to 100%), or off';
export const HALT_SAMPLE_EXPECTED = `a whole number of outcomes from ${HALT_SAMPLE_MIN} to ${HALT_SAMPLE_MAX}`;
