// How long remaining work takes at the configured limits, from the budget left now. The limits are
// sliding windows, so after today's remainder the work proceeds one full window's budget at a time.
import type { Rate } from '../core/duration.ts';
import { formatRate, humanizeMs } from '../core/duration.ts';

export interface EtaInput {
  remaining: number;
  tokens: number;
  perToken: Rate;
  perOrg: Rate;
  /** Budget usable right now (min of the org's and the tokens' remaining); defaults to a full window. */
  availableNow?: number | undefined;
}

export interface Eta {
  ms: number;
  /** Which limit sets the pace. */
  boundBy: 'org' | 'token' | 'none';
  availableNow: number;
  text: string;
}

export function estimate(input: EtaInput): Eta {
  const { remaining, tokens, perToken, perOrg } = input;
  const fullNow = Math.min(perOrg.max, tokens * perToken.max);
  const availableNow = Math.max(0, Math.min(input.availableNow ?? fullNow, fullNow));
  if (remaining <= 0) return { ms: 0, boundBy: 'none', availableNow, text: 'nothing left' };
  if (tokens === 0)
    return { ms: Infinity, boundBy: 'token', availableNow: 0, text: 'never: no token for this organization' };
  const after = Math.max(0, remaining - availableNow);
  const tokenMs = Math.ceil(after / (tokens * perToken.max)) * perToken.windowMs;
  const orgMs = Math.ceil(after / perOrg.max) * perOrg.windowMs;
  const ms = Math.max(tokenMs, orgMs);
  const boundBy = after === 0 ? 'none' : orgMs >= tokenMs ? 'org' : 'token';
  const pace =
    boundBy === 'org'
      ? formatRate(perOrg)
      : `${tokens} token${tokens > 1 ? 's' : ''} x ${formatRate(perToken)}`;
  const text =
    after === 0
      ? `within the current budget (${availableNow} left now)`
      : `${humanizeMs(ms)} at ${pace}, ${availableNow} left in the current window`;
  return { ms, boundBy, availableNow, text };
}
